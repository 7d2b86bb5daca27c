"""POST /api/v1/spans: our native JSON format, with the API's answers and error shape."""

import json
from typing import Any

import pytest
import yaml
from django.test import Client

from apps.ingest.models import Encoding, RawBatch, Trace
from apps.ingest.services.batches import raw_batches_drain
from apps.teams.services import api_token_create, ingest_token_revoke
from tests.builders.stored_spans import stored_span
from tests.conftest import TeamWorld, client_for
from tests.ingest.endpoint_helpers import (
    JSON,
    TRACE_HEX,
    assert_nothing_written,
    batch_spans,
    body_spans,
    gzip_bomb,
    gzipped,
    native_batch,
    native_span,
    post,
)

URL = "/api/v1/spans"
GZIP = {"Content-Encoding": "gzip"}


pytestmark = pytest.mark.usefixtures("clean_cache")


def send(body: bytes, token: str | None, **kwargs: Any) -> Any:
    kwargs.setdefault("content_type", JSON)
    return post(URL, body, token=token, **kwargs)


def error_of(response: Any) -> tuple[str, str]:
    body = response.json()
    assert set(body) == {"error"}
    return body["error"]["code"], body["error"]["message"]


ROOT = native_span("1111111111111111", "POST /chat", kind="SERVER", status="ok")
CHILD = native_span(
    "2222222222222222",
    "chat gpt-4o",
    parent_id="1111111111111111",
    service="llm-gateway",
    start=1760000000620000000,
    end=1760000002350000000,
    attributes={"gen_ai.system": "openai", "usage": {"input_tokens": 12}},
    events=[{"name": "first_token", "time": "2025-10-09T10:53:20.98+02:00"}],
)


def test_a_batch_is_committed_and_counted(world: TeamWorld, token: str) -> None:
    body = native_batch(ROOT, CHILD)

    response = send(body, token)

    assert response.status_code == 200
    assert response.json() == {"accepted": 2, "rejected": 0, "errors": []}
    batch = RawBatch.objects.get()
    assert (batch.team, batch.span_count) == (world.team, 2)
    assert batch_spans(batch) == body_spans(body, Encoding.NATIVE_JSON)


def test_stored_spans_keep_their_ids_services_and_attributes(world: TeamWorld, token: str) -> None:
    send(native_batch(ROOT, CHILD), token)

    raw_batches_drain()

    assert bytes(Trace.objects.get(team=world.team).trace_id).hex() == TRACE_HEX
    child = stored_span(bytes.fromhex("2222222222222222"))
    assert child.service == "llm-gateway"
    assert child.attributes["gen_ai.provider.name"] == "openai"
    assert child.attributes["usage.input_tokens"] == 12
    assert stored_span(bytes.fromhex("1111111111111111")).service == "chat-api"


def test_a_gzip_batch_is_stored_decompressed(token: str) -> None:
    body = native_batch(ROOT)

    response = send(gzipped(body), token, headers=GZIP)

    assert response.status_code == 200
    batch = RawBatch.objects.get()
    assert batch_spans(batch) == body_spans(body, Encoding.NATIVE_JSON)


def test_spans_rejected_one_by_one_are_listed_and_the_rest_kept(token: str) -> None:
    body = native_batch(
        ROOT,
        native_span("2222222222222222", ""),
        native_span("3333333333333333", "late", start="2025-10-09T08:53:21Z"),
    )

    response = send(body, token)

    assert response.status_code == 200
    assert response.json() == {
        "accepted": 1,
        "rejected": 2,
        "errors": ["span 1: empty name", "span 2: end before start"],
    }
    assert RawBatch.objects.get().span_count == 1


def test_a_batch_whose_spans_are_all_rejected_stores_nothing(token: str) -> None:
    response = send(native_batch(native_span("zz" * 8)), token)

    assert response.status_code == 200
    assert response.json() == {"accepted": 0, "rejected": 1, "errors": ["span 0: invalid span id"]}
    assert_nothing_written()


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b'{"spans": [', "malformed JSON"),
        (b"", "malformed JSON"),
        (b'{"spans": "none"}', "invalid span batch"),
        (json.dumps({"spans": [{"trace_id": TRACE_HEX}]}).encode(), "invalid span batch"),
    ],
)
def test_an_undecodable_body_gets_400(token: str, body: bytes, expected: str) -> None:
    response = send(body, token)

    assert response.status_code == 400
    code, message = error_of(response)
    assert code == "invalid_body"
    assert expected in message
    assert_nothing_written()


def test_a_corrupt_gzip_body_gets_400(token: str) -> None:
    response = send(gzipped(native_batch(ROOT))[:-10], token, headers=GZIP)

    assert response.status_code == 400
    assert error_of(response)[0] == "invalid_body"
    assert_nothing_written()


@pytest.mark.parametrize("authorization", [None, "Bearer lbi_unknown", "Token abc", "Bearer a b"])
def test_a_request_without_a_valid_ingest_token_gets_401(
    world: TeamWorld, authorization: str | None
) -> None:
    headers = {"Authorization": authorization} if authorization else {}

    response = send(native_batch(ROOT), None, headers=headers)

    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Bearer"
    assert error_of(response)[0] == "authentication_failed"
    assert_nothing_written()


def test_a_revoked_token_gets_401(world: TeamWorld, token: str) -> None:
    ingest_token_revoke(token=world.team.ingest_tokens.get())

    response = send(native_batch(ROOT), token)

    assert response.status_code == 401
    assert "unknown or revoked" in error_of(response)[1]
    assert_nothing_written()


def test_a_personal_api_token_gets_401(world: TeamWorld) -> None:
    _, raw = api_token_create(user=world.owner, name="laptop")

    response = send(native_batch(ROOT), raw)

    assert response.status_code == 401
    assert "personal API token" in error_of(response)[1]
    assert_nothing_written()


def test_a_signed_in_session_is_not_an_ingest_token(world: TeamWorld) -> None:
    response = send(native_batch(ROOT), None, client=client_for(world.owner))

    assert response.status_code == 401
    assert_nothing_written()


def test_a_body_over_the_cap_as_sent_gets_413(token: str, settings) -> None:
    body = native_batch(ROOT, CHILD)
    settings.INGEST_MAX_BODY_BYTES = len(body) - 1

    response = send(body, token)

    assert response.status_code == 413
    assert error_of(response)[0] == "request_too_large"
    assert_nothing_written()


def test_a_gzip_bomb_gets_413(token: str, settings) -> None:
    settings.INGEST_MAX_DECOMPRESSED_BYTES = 1 << 20

    response = send(gzip_bomb(64 << 20), token, headers=GZIP)

    assert response.status_code == 413
    code, message = error_of(response)
    assert code == "request_too_large"
    assert "after decompression" in message
    assert_nothing_written()


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-protobuf", ""])
def test_another_content_type_gets_415(token: str, content_type: str) -> None:
    response = send(native_batch(ROOT), token, content_type=content_type)

    assert response.status_code == 415
    assert error_of(response)[0] == "unsupported_media_type"
    assert_nothing_written()


def test_get_gets_405(token: str) -> None:
    response = Client().get(URL, headers={"Authorization": f"Bearer {token}"})

    assert response.status_code == 405
    assert error_of(response)[0] == "method_not_allowed"


def test_an_ingest_token_reads_nothing_from_the_rest_api(token: str) -> None:
    response = Client().get("/api/v1/pipelines/", headers={"Authorization": f"Bearer {token}"})

    assert response.status_code == 401


def test_the_schema_documents_the_endpoint_its_body_and_its_token(db: None) -> None:
    schema = yaml.safe_load(Client().get("/api/schema/").content)

    operation = schema["paths"]["/api/v1/spans"]["post"]
    body = operation["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/NativeSpanBatchRequest"}
    span = schema["components"]["schemas"]["NativeSpanRequest"]
    assert {"trace_id", "span_id", "name", "start", "end"} <= set(span["required"])
    assert operation["security"] == [{"ingestToken": []}]
    assert {"200", "400", "401", "413", "415", "429", "503"} <= set(operation["responses"])
    assert schema["components"]["securitySchemes"]["ingestToken"]["scheme"] == "bearer"
