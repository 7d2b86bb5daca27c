import pytest
from django.test import Client

from apps.core import health, views


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
    assert body["checks"]["broker"]["ok"] is False
    assert body["checks"]["broker"]["error"]


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
