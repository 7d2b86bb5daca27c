import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from apps.teams.services import api_token_create, api_token_revoke
from tests.authorization_headers import malformed_authorization
from tests.builders.api import ApiWorld, db_state, error_of

URL = "/api/v1/pipelines/"


def bearer(value: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=value)
    return client


def test_a_valid_token_authenticates_and_records_its_use(api: ApiWorld):
    token, raw = api_token_create(user=api.world.editor, name="ci")
    response = bearer(f"Bearer {raw}").get(URL)
    assert response.status_code == 200
    assert response.json()["count"] == 1
    token.refresh_from_db()
    assert token.last_used_at is not None


def test_the_bearer_keyword_is_case_insensitive(api: ApiWorld):
    _, raw = api_token_create(user=api.world.editor, name="ci")
    assert bearer(f"bearer {raw}").get(URL).status_code == 200


def test_a_revoked_token_gets_401(api: ApiWorld):
    token, raw = api_token_create(user=api.world.owner, name="old")
    api_token_revoke(token=token)
    before = db_state()
    response = bearer(f"Bearer {raw}").delete(URL + "rag-chat/")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Bearer"
    assert error_of(response)["code"] == "authentication_failed"
    assert db_state() == before


def test_a_token_of_a_deactivated_user_gets_401(api: ApiWorld):
    _, raw = api_token_create(user=api.world.owner, name="old")
    api.world.owner.is_active = False
    api.world.owner.save()
    assert bearer(f"Bearer {raw}").get(URL).status_code == 401


def test_a_garbage_token_gets_401(api: ApiWorld):
    for value in ("Bearer lbk_not-a-real-token", "Bearer nonsense", "Bearer a b"):
        response = bearer(value).get(URL)
        assert response.status_code == 401, value
        assert response["WWW-Authenticate"] == "Bearer"


def test_a_missing_token_gets_401(api: ApiWorld):
    response = APIClient().get(URL)
    assert response.status_code == 401
    assert error_of(response) == {
        "code": "not_authenticated",
        "message": "Authentication credentials were not provided.",
    }


def test_another_scheme_is_not_taken_for_a_token(api: ApiWorld):
    assert bearer("Basic b2xpdmlhOnB3").get(URL).status_code == 401


def test_a_session_login_authenticates(api: ApiWorld):
    client = APIClient()
    client.force_login(api.world.viewer)
    assert client.get(URL).status_code == 200


@pytest.mark.parametrize("value", malformed_authorization("lbk_"))
def test_a_malformed_authorization_header_gets_401_without_a_token_lookup(
    api: ApiWorld, value: str
) -> None:
    with CaptureQueriesContext(connection) as queries:
        response = bearer(value).get(URL)

    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Bearer"
    assert error_of(response)["code"] in ("authentication_failed", "not_authenticated")
    assert not [q for q in queries.captured_queries if "teams_apitoken" in q["sql"]]


def test_a_blank_authorization_header_leaves_a_session_signed_in(api: ApiWorld) -> None:
    client = bearer(" ")
    client.force_login(api.world.viewer)

    assert client.get(URL).status_code == 200
