"""POST /v1/traces: OTLP/HTTP as the specification describes it, and every refusal."""

import io
import json
import time
import tracemalloc
import zlib

import pytest

from apps.ingest.decoding import RpcCode
from apps.ingest.models import Encoding, RawBatch, Trace
from apps.ingest.services.batches import raw_batches_drain
from apps.ingest.tasks import drain_schedule
from apps.teams.services import api_token_create, ingest_token_revoke
from tests.builders.spans import T0, encode, span
from tests.builders.stored_spans import stored_span_ids, stored_spans
from tests.conftest import TeamWorld
from tests.ingest.endpoint_helpers import (
    JSON,
    PROTOBUF,
    TRACE_HEX,
    assert_nothing_written,
    batch_spans,
    body_spans,
    chat_spans,
    export_response,
    gzip_bomb,
    gzipped,
    ingest_token,
    otlp_json_batch,
    otlp_json_span,
    post,
    protobuf_batch,
    status_of,
)
from tests.timing import MS

URL = "/v1/traces"
GZIP = {"Content-Encoding": "gzip"}


pytestmark = pytest.mark.usefixtures("clean_cache")


# --- Accepted -----------------------------------------------------------------------


def test_a_protobuf_batch_is_committed_and_answered_with_an_empty_export_response(
    world: TeamWorld, token: str
) -> None:
    body = protobuf_batch(4)

    response = post(URL, body, token=token)

    assert response.status_code == 200
    assert not export_response(response).HasField("partial_success")
    batch = RawBatch.objects.get()
    assert batch.team == world.team
    assert batch.token == world.team.ingest_tokens.get()
    assert batch.span_count == 4
    assert batch_spans(batch) == body_spans(body, Encoding.OTLP_PROTOBUF)


def test_the_answer_uses_the_media_type_the_request_was_sent_in(token: str) -> None:
    response = post(URL, protobuf_batch(), content_type="application/protobuf", token=token)

    assert response.status_code == 200
    assert response["Content-Type"] == "application/protobuf"
    assert RawBatch.objects.count() == 1


def test_a_gzip_protobuf_batch_is_stored_decompressed(token: str) -> None:
    body = protobuf_batch(3)

    response = post(URL, gzipped(body), token=token, headers=GZIP)

    assert response.status_code == 200
    batch = RawBatch.objects.get()
    assert batch_spans(batch) == body_spans(body, Encoding.OTLP_PROTOBUF)


def test_a_deflate_protobuf_batch_is_accepted(token: str) -> None:
    body = protobuf_batch(3)

    response = post(URL, zlib.compress(body), token=token, headers={"Content-Encoding": "deflate"})

    assert response.status_code == 200
    batch = RawBatch.objects.get()
    assert batch_spans(batch) == body_spans(body, Encoding.OTLP_PROTOBUF)


def test_a_json_batch_with_hex_ids_is_answered_in_json_and_stored_with_those_ids(
    world: TeamWorld, token: str
) -> None:
    body = otlp_json_batch(
        otlp_json_span("1111111111111111", "POST /chat"),
        otlp_json_span("2222222222222222", "auth", parentSpanId="1111111111111111"),
    )

    response = post(URL, body, content_type=JSON, token=token)

    assert response.status_code == 200
    assert response["Content-Type"] == JSON
    assert json.loads(response.content) == {}
    batch = RawBatch.objects.get()
    assert batch.span_count == 2
    assert batch_spans(batch) == body_spans(body, Encoding.OTLP_JSON)
    raw_batches_drain()
    assert {span_id.hex() for span_id in stored_span_ids()} == {
        "1111111111111111",
        "2222222222222222",
    }
    trace = Trace.objects.get()
    assert bytes(trace.trace_id).hex() == TRACE_HEX
    assert trace.team == world.team


def test_a_gzip_json_batch_is_accepted(token: str) -> None:
    body = otlp_json_batch(otlp_json_span("1111111111111111"))

    response = post(URL, gzipped(body), content_type=JSON, token=token, headers=GZIP)

    assert response.status_code == 200
    batch = RawBatch.objects.get()
    assert batch_spans(batch) == body_spans(body, Encoding.OTLP_JSON)


def test_a_content_type_with_a_charset_is_accepted(token: str) -> None:
    body = otlp_json_batch(otlp_json_span("1111111111111111"))

    response = post(URL, body, content_type="application/json; charset=utf-8", token=token)

    assert response.status_code == 200
    assert RawBatch.objects.count() == 1


def test_spans_rejected_one_by_one_are_reported_in_partial_success_and_the_rest_kept(
    token: str,
) -> None:
    spans = [
        *chat_spans(3),
        span(0x77, name=""),  # empty name
        span(0x78, None, T0 + 5 * MS, T0, name="backwards"),
    ]

    response = post(URL, encode(spans), token=token)

    assert response.status_code == 200
    partial = export_response(response).partial_success
    assert partial.rejected_spans == 2
    assert "empty name (1)" in partial.error_message
    assert "end before start (1)" in partial.error_message
    assert RawBatch.objects.get().span_count == 3


def test_json_partial_success_counts_rejected_spans_as_an_int64_string(token: str) -> None:
    body = otlp_json_batch(
        otlp_json_span("1111111111111111"),
        otlp_json_span("22", "short span id"),
    )

    response = post(URL, body, content_type=JSON, token=token)

    assert response.status_code == 200
    partial = json.loads(response.content)["partialSuccess"]
    assert partial["rejectedSpans"] == "1"
    assert "invalid span id" in partial["errorMessage"]
    assert RawBatch.objects.get().span_count == 1


def test_a_batch_whose_spans_are_all_rejected_stores_nothing_but_answers_200(
    token: str,
) -> None:
    response = post(URL, encode([span(0x77, name=""), span(0x78, name="")]), token=token)

    assert response.status_code == 200
    assert export_response(response).partial_success.rejected_spans == 2
    assert_nothing_written()


def test_an_empty_request_is_a_success_that_stores_nothing(token: str) -> None:
    response = post(URL, b"", token=token)

    assert response.status_code == 200
    assert not export_response(response).HasField("partial_success")
    assert_nothing_written()


def test_draining_is_scheduled_only_once_the_batch_is_committed(
    token: str, django_capture_on_commit_callbacks
) -> None:
    with django_capture_on_commit_callbacks() as callbacks:
        response = post(URL, protobuf_batch(), token=token)

    assert response.status_code == 200
    assert callbacks == [drain_schedule]


# --- Refused: bad data --------------------------------------------------------------


def test_an_undecodable_protobuf_body_gets_400_with_a_protobuf_status(token: str) -> None:
    response = post(URL, b"\x0a\xff\xff\xff", token=token)

    assert response.status_code == 400
    assert response["Content-Type"] == PROTOBUF
    code, message = status_of(response)
    assert code == RpcCode.INVALID_ARGUMENT
    assert message
    assert_nothing_written()


def test_malformed_json_gets_400_with_a_json_status(token: str) -> None:
    response = post(URL, b'{"resourceSpans": [', content_type=JSON, token=token)

    assert response.status_code == 400
    assert response["Content-Type"] == JSON
    code, message = status_of(response)
    assert code == RpcCode.INVALID_ARGUMENT
    assert "malformed JSON" in message
    assert_nothing_written()


def test_a_corrupt_gzip_body_gets_400(token: str) -> None:
    truncated = gzipped(protobuf_batch())[:-12]

    response = post(URL, truncated, token=token, headers=GZIP)

    assert response.status_code == 400
    assert "gzip" in status_of(response)[1]
    assert_nothing_written()


def test_an_unsupported_content_encoding_gets_400(token: str) -> None:
    response = post(URL, protobuf_batch(), token=token, headers={"Content-Encoding": "br"})

    assert response.status_code == 400
    assert "Content-Encoding" in status_of(response)[1]
    assert_nothing_written()


# --- Refused: authentication --------------------------------------------------------


@pytest.mark.parametrize(
    ("authorization", "expected"),
    [
        (None, "missing ingest token"),
        ("Bearer lbi_not-a-real-token", "unknown or revoked"),
        ("Bearer", "malformed Authorization header"),
        ("Basic dXNlcjpwYXNz", "malformed Authorization header"),
    ],
)
def test_a_request_without_a_valid_ingest_token_gets_401(
    world: TeamWorld, authorization: str | None, expected: str
) -> None:
    headers = {"Authorization": authorization} if authorization else {}

    response = post(URL, protobuf_batch(), headers=headers)

    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Bearer"
    code, message = status_of(response)
    assert code == RpcCode.UNAUTHENTICATED
    assert expected in message
    assert_nothing_written()


def test_a_revoked_ingest_token_gets_401(world: TeamWorld) -> None:
    raw = ingest_token(world.team)
    ingest_token_revoke(token=world.team.ingest_tokens.get())

    response = post(URL, protobuf_batch(), token=raw)

    assert response.status_code == 401
    assert_nothing_written()


def test_a_personal_api_token_is_not_an_ingest_token(world: TeamWorld) -> None:
    _, raw = api_token_create(user=world.owner, name="laptop")

    response = post(URL, otlp_json_batch(otlp_json_span("11" * 8)), content_type=JSON, token=raw)

    assert response.status_code == 401
    assert "personal API token" in status_of(response)[1]
    assert_nothing_written()


# --- Refused: size ------------------------------------------------------------------


def test_a_body_over_the_cap_as_sent_gets_413(token: str, settings) -> None:
    body = protobuf_batch(50)
    settings.INGEST_MAX_BODY_BYTES = len(body) - 1

    response = post(URL, body, token=token)

    assert response.status_code == 413
    code, message = status_of(response)
    assert code == RpcCode.RESOURCE_EXHAUSTED
    assert "as sent" in message
    assert_nothing_written()


def test_a_body_exactly_at_the_cap_is_accepted(token: str, settings) -> None:
    body = protobuf_batch(50)
    settings.INGEST_MAX_BODY_BYTES = len(body)

    assert post(URL, body, token=token).status_code == 200


class CountingStream(io.BytesIO):
    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.bytes_read = 0

    def read(self, size: int | None = -1, /) -> bytes:
        chunk = super().read(size)
        self.bytes_read += len(chunk)
        return chunk


def test_a_declared_length_over_the_cap_gets_413_before_the_body_is_read(
    token: str, settings
) -> None:
    settings.INGEST_MAX_BODY_BYTES = 1000
    stream = CountingStream(protobuf_batch())

    response = post(URL, b"", token=token, environ={"CONTENT_LENGTH": "5000", "wsgi.input": stream})

    assert response.status_code == 413
    assert stream.bytes_read == 0
    assert_nothing_written()


def test_a_content_length_shorter_than_the_body_reads_only_the_declared_bytes(
    token: str,
) -> None:
    body = protobuf_batch(20)
    stream = CountingStream(body)

    response = post(URL, b"", token=token, environ={"CONTENT_LENGTH": "40", "wsgi.input": stream})

    assert response.status_code == 400
    assert stream.bytes_read == 40
    assert_nothing_written()


class CutShortStream(io.BytesIO):
    """A body whose client disconnects after ``keep`` bytes, as gunicorn reports it."""

    def __init__(self, data: bytes, keep: int) -> None:
        super().__init__(data[:keep])

    def read(self, size: int | None = -1, /) -> bytes:
        chunk = super().read(size)
        if not chunk:
            raise OSError("No more data after the first bytes")
        return chunk


def test_a_client_that_disconnects_mid_body_gets_400_and_nothing_is_written(token: str) -> None:
    body = protobuf_batch(20)
    stream = CutShortStream(body, keep=len(body) // 2)
    environ = {"CONTENT_LENGTH": str(len(body)), "wsgi.input": stream}

    response = post(URL, b"", token=token, environ=environ)

    assert response.status_code == 400
    assert status_of(response) == (RpcCode.INVALID_ARGUMENT, "the request body was cut short")
    assert_nothing_written()


def test_a_content_length_that_is_not_a_number_gets_400(token: str) -> None:
    response = post(URL, protobuf_batch(), token=token, environ={"CONTENT_LENGTH": "lots"})

    assert response.status_code == 400
    assert_nothing_written()


def test_a_body_over_the_cap_after_decompression_gets_413(token: str, settings) -> None:
    body = protobuf_batch(200)
    settings.INGEST_MAX_DECOMPRESSED_BYTES = len(body) - 1

    response = post(URL, gzipped(body), token=token, headers=GZIP)

    assert response.status_code == 413
    assert "after decompression" in status_of(response)[1]
    assert_nothing_written()


def test_a_gzip_bomb_gets_413_quickly_and_without_inflating_it(token: str, settings) -> None:
    settings.INGEST_MAX_DECOMPRESSED_BYTES = 1 << 20
    bomb = gzip_bomb(256 << 20)  # 256 MiB of zeros in ~250 KB
    assert len(bomb) < settings.INGEST_MAX_BODY_BYTES

    tracemalloc.start()
    started = time.perf_counter()
    try:
        response = post(URL, bomb, token=token, headers=GZIP)
        elapsed = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert response.status_code == 413
    assert elapsed < 2
    assert peak < 16 << 20
    assert_nothing_written()


# --- Refused: protocol --------------------------------------------------------------


@pytest.mark.parametrize("content_type", ["text/plain", "application/xml", ""])
def test_another_content_type_gets_415_with_a_json_status(token: str, content_type: str) -> None:
    response = post(URL, protobuf_batch(), content_type=content_type, token=token)

    assert response.status_code == 415
    assert response["Content-Type"] == JSON
    code, message = status_of(response)
    assert "application/x-protobuf" in message
    assert code == RpcCode.UNIMPLEMENTED
    assert_nothing_written()


@pytest.mark.parametrize("method", ["get", "put", "delete"])
def test_methods_other_than_post_get_405(client, token: str, method: str) -> None:
    response = getattr(client, method)(URL, headers={"Authorization": f"Bearer {token}"})

    assert response.status_code == 405
    assert response["Allow"] == "POST"
    assert status_of(response)[0] == RpcCode.UNIMPLEMENTED


def test_a_405_for_a_protobuf_request_is_a_protobuf_status(client, token: str) -> None:
    response = client.put(URL, protobuf_batch(), content_type=PROTOBUF)

    assert response.status_code == 405
    assert response["Content-Type"] == PROTOBUF
    assert status_of(response)[0] == RpcCode.UNIMPLEMENTED
    assert_nothing_written()


def test_a_server_span_kind_survives_the_round_trip(token: str) -> None:
    post(URL, encode([span(0x42, name="GET /", kind="server")]), token=token)

    raw_batches_drain()

    [stored] = stored_spans()
    assert stored.kind == 2
