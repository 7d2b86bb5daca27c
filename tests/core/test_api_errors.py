import json

import pytest

from apps.core.api.parsers import MAX_BODY_BYTES
from tests.builders.api import ApiWorld, db_state, error_of, token_client

LIST = "/api/v1/pipelines/"
DETAIL = LIST + "rag-chat/"


@pytest.mark.parametrize("body", ['{"slug": "agent", "name": ', "not json", "{'a': 1}"])
def test_malformed_json_gets_400_with_the_error_body(api: ApiWorld, body: str):
    before = db_state()
    response = token_client(api.world.owner).generic(
        "POST", LIST, body, content_type="application/json"
    )
    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == "parse_error"
    assert error["message"].startswith("JSON parse error")
    assert db_state() == before


def test_a_json_body_that_is_not_an_object_is_invalid(api: ApiWorld):
    before = db_state()
    response = token_client(api.world.owner).post(LIST, [1, 2], format="json")
    assert response.status_code == 400
    assert "non_field_errors" in error_of(response)["fields"]
    assert db_state() == before


def test_an_oversized_body_gets_413(api: ApiWorld):
    before = db_state()
    payload = {"name": "x", "description": "d" * (MAX_BODY_BYTES + 1)}
    response = token_client(api.world.owner).patch(DETAIL, payload, format="json")
    assert response.status_code == 413
    assert error_of(response)["code"] == "request_too_large"
    assert db_state() == before


def test_a_body_just_under_the_cap_is_read(api: ApiWorld):
    text = "d" * (MAX_BODY_BYTES - 100)
    body = json.dumps({"description": text})
    response = token_client(api.world.owner).generic(
        "PATCH", DETAIL, body, content_type="application/json"
    )
    assert response.status_code == 200
    api.pipeline.refresh_from_db()
    assert api.pipeline.description == text


def test_a_form_encoded_body_gets_415(api: ApiWorld):
    before = db_state()
    response = token_client(api.world.owner).post(
        LIST, "slug=agent&name=Agent", content_type="application/x-www-form-urlencoded"
    )
    assert response.status_code == 415
    assert error_of(response)["code"] == "unsupported_media_type"
    assert db_state() == before


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("put", LIST, {"GET", "HEAD", "POST", "OPTIONS"}),
        ("delete", LIST, {"GET", "HEAD", "POST", "OPTIONS"}),
        ("post", DETAIL, {"GET", "HEAD", "PUT", "PATCH", "DELETE", "OPTIONS"}),
        ("put", DETAIL + "stages/retrieval/", {"GET", "HEAD", "PATCH", "DELETE", "OPTIONS"}),
        ("get", DETAIL + "stages/reorder/", {"POST", "OPTIONS"}),
        ("post", "/api/v1/me/", {"GET", "HEAD", "OPTIONS"}),
    ],
)
def test_an_unsupported_method_gets_405_naming_the_allowed_ones(
    api: ApiWorld, method: str, path: str, allowed: set[str]
):
    before = db_state()
    response = getattr(token_client(api.world.owner), method)(path, {}, format="json")
    assert response.status_code == 405
    assert error_of(response)["code"] == "method_not_allowed"
    assert {m.strip() for m in response["Allow"].split(",")} == allowed
    assert db_state() == before


def test_head_is_answered_like_get(api: ApiWorld):
    response = token_client(api.world.viewer).head(DETAIL)
    assert response.status_code == 200


def test_an_invalid_page_size_falls_back_to_the_default(api: ApiWorld):
    response = token_client(api.world.viewer).get(LIST, {"page_size": "lots"})
    assert response.status_code == 200
    assert response.json()["count"] == 1


def test_options_describes_the_resource_without_changing_it(api: ApiWorld):
    before = db_state()
    response = token_client(api.world.viewer).options(DETAIL)
    assert response.status_code == 200
    assert "application/json" in response.json()["parses"]
    assert db_state() == before


def test_a_body_past_djangos_own_cap_gets_413_too(api: ApiWorld):
    before = db_state()
    body = json.dumps({"description": "d" * (3 * MAX_BODY_BYTES)})
    response = token_client(api.world.owner).generic(
        "PATCH", DETAIL, body, content_type="application/json"
    )
    assert response.status_code == 413
    assert error_of(response)["code"] == "request_too_large"
    assert db_state() == before
