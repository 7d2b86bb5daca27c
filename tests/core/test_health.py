import pytest
from django.test import Client

from apps.core import health, views
from tests.builders.configuration import make_user


def test_healthz_answers_ok_without_touching_dependencies() -> None:
    response = Client().get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


@pytest.mark.django_db
def test_readyz_names_each_check_and_is_ready() -> None:
    response = Client().get("/readyz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert body["checks"]["database"] == {"ok": True}
    assert body["checks"]["broker"] == {"ok": True}


@pytest.mark.django_db
def test_readyz_answers_503_naming_the_broker_when_it_is_down(
    monkeypatch: pytest.MonkeyPatch, settings
) -> None:
    # Point the broker at a port where nothing listens: a real failed connection.
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {}
    response = Client().get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable"
    assert body["checks"]["database"] == {"ok": True}
    assert body["checks"]["broker"] == {"ok": False}  # no exception text for strangers
    assert "127.0.0.1" not in response.content.decode()


@pytest.mark.django_db
def test_readyz_shows_staff_why_a_check_fails(settings) -> None:
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {}
    client = Client()
    client.force_login(make_user("ops", is_staff=True))

    body = client.get("/readyz").json()

    assert body["checks"]["broker"]["ok"] is False
    assert body["checks"]["broker"]["error"]


@pytest.mark.django_db
def test_readyz_shows_a_signed_in_non_staff_user_no_exception_text(settings) -> None:
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {}
    client = Client()
    client.force_login(make_user("someone"))

    assert client.get("/readyz").json()["checks"]["broker"] == {"ok": False}


@pytest.mark.django_db
def test_readyz_answers_503_when_the_database_check_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> str:
        return "OperationalError: connection refused"

    monkeypatch.setattr(
        views, "readiness_checks", lambda: {"database": broken, "broker": health.check_broker}
    )
    response = Client().get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"]["database"]["ok"] is False
