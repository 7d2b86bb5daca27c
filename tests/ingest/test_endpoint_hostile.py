"""Requests built to hurt, from anyone who signed up: stacked compression, thousands of
gzip members, deeply nested JSON and mangled Authorization headers. Each is refused
with a 4xx, cheaply, and leaves nothing behind."""

import gzip
import time
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.ingest.decoding import RpcCode
from apps.ingest.decoding.json_depth import MAX_JSON_DEPTH
from apps.ingest.models import Encoding, RawBatch
from apps.ingest.ratelimit import WINDOW_S, rate_limit_consume, rate_limit_wait
from tests.authorization_headers import malformed_authorization
from tests.conftest import TeamWorld
from tests.ingest.endpoint_helpers import (
    JSON,
    PROTOBUF,
    TRACE_HEX,
    assert_nothing_written,
    batch_spans,
    body_spans,
    gzipped,
    ingest_token,
    native_batch,
    native_span,
    otlp_json_batch,
    otlp_json_span,
    post,
    protobuf_batch,
    rate_window_fresh,
    status_of,
)

OTLP = "/v1/traces"
NATIVE = "/api/v1/spans"
DEEP = 3000

pytestmark = pytest.mark.usefixtures("clean_cache")


def native_error(response: Any) -> tuple[str, str]:
    body = response.json()
    assert set(body) == {"error"}
    return body["error"]["code"], body["error"]["message"]


def refusal_of(response: Any) -> str:
    """The message of a refusal, in either endpoint's error shape."""
    if response.wsgi_request.path == OTLP:
        return status_of(response)[1]
    return native_error(response)[1]


# --- Compression ----------------------------------------------------------------------

ENDPOINTS = [
    pytest.param(OTLP, lambda: protobuf_batch(3), PROTOBUF, id="otlp"),
    pytest.param(NATIVE, lambda: native_batch(native_span("1111111111111111")), JSON, id="native"),
]
ENCODINGS = {PROTOBUF: Encoding.OTLP_PROTOBUF, JSON: Encoding.NATIVE_JSON}


@pytest.mark.parametrize(("url", "batch", "content_type"), ENDPOINTS)
def test_three_stacked_content_encodings_get_415(
    token: str, url: str, batch: Any, content_type: str
) -> None:
    body = gzipped(gzipped(gzipped(batch())))

    response = post(
        url,
        body,
        content_type=content_type,
        token=token,
        headers={"Content-Encoding": "gzip,gzip,gzip"},
    )

    assert response.status_code == 415
    assert "at most 2" in refusal_of(response)
    if url == OTLP:
        assert status_of(response)[0] == RpcCode.UNIMPLEMENTED
    else:
        assert native_error(response)[0] == "unsupported_media_type"
    assert_nothing_written()


@pytest.mark.parametrize(("url", "batch", "content_type"), ENDPOINTS)
def test_two_stacked_gzip_encodings_are_still_undone(
    token: str, url: str, batch: Any, content_type: str
) -> None:
    raw = batch()

    response = post(
        url,
        gzipped(gzipped(raw)),
        content_type=content_type,
        token=token,
        headers={"Content-Encoding": "gzip, gzip"},
    )

    assert response.status_code == 200
    assert batch_spans(RawBatch.objects.get()) == body_spans(raw, ENCODINGS[content_type])


@pytest.mark.parametrize(("url", "batch", "content_type"), ENDPOINTS)
def test_a_small_request_of_empty_gzip_members_under_two_codings_is_refused_quickly(
    token: str, url: str, batch: Any, content_type: str
) -> None:
    # About 5 KiB that inflates to megabytes of empty members.
    body = gzipped(gzip.compress(b"") * 400_000)
    assert len(body) < 32_000
    started = time.process_time()

    response = post(
        url,
        body,
        content_type=content_type,
        token=token,
        headers={"Content-Encoding": "gzip,gzip"},
    )

    assert time.process_time() - started < 1.0
    assert response.status_code == 400
    assert "at most 8 members" in refusal_of(response)
    assert_nothing_written()


# --- Order of checks: no decompression for a request that is refused anyway -----------


@pytest.mark.parametrize(("url", "batch", "content_type"), ENDPOINTS)
def test_an_unknown_token_with_a_gzip_bomb_gets_401_quickly(
    world: TeamWorld, url: str, batch: Any, content_type: str
) -> None:
    bomb = gzip.compress(b"") * 200_000
    started = time.process_time()

    response = post(
        url,
        bomb,
        content_type=content_type,
        token="lbi_unknown",
        headers={"Content-Encoding": "gzip"},
    )

    assert time.process_time() - started < 1.0
    assert response.status_code == 401
    assert_nothing_written()


@pytest.mark.parametrize(("url", "batch", "content_type"), ENDPOINTS)
def test_a_token_over_its_rate_gets_429_before_its_body_is_decompressed(
    world: TeamWorld, settings, url: str, batch: Any, content_type: str
) -> None:
    settings.INGEST_RATE_LIMIT_SPANS = 1  # five spans per window
    rate_window_fresh()
    token = ingest_token(world.team)
    filler = native_batch(*(native_span(f"{i:016x}") for i in range(1, 6)))
    assert post(NATIVE, filler, content_type=JSON, token=token).status_code == 200

    # Corrupt: decompressing it would answer 400, so a 429 shows it was never inflated.
    corrupt = gzipped(batch())[:-12]
    response = post(
        url, corrupt, content_type=content_type, token=token, headers={"Content-Encoding": "gzip"}
    )

    assert response.status_code == 429
    assert int(response["Retry-After"]) >= 1
    assert RawBatch.objects.count() == 1


def test_the_last_span_a_window_allows_still_gets_in(world: TeamWorld, settings) -> None:
    settings.INGEST_RATE_LIMIT_SPANS = 1
    rate_window_fresh()
    token = ingest_token(world.team)
    four = native_batch(*(native_span(f"{i:016x}") for i in range(1, 5)))
    assert post(NATIVE, four, content_type=JSON, token=token).status_code == 200

    response = post(NATIVE, native_batch(native_span("5" * 16)), content_type=JSON, token=token)

    assert response.status_code == 200
    assert RawBatch.objects.count() == 2


def test_the_early_rate_check_counts_nothing(settings) -> None:
    settings.INGEST_RATE_LIMIT_SPANS = 1
    rate_window_fresh()
    now = 1_000_002.0

    assert rate_limit_wait(account_key="user:1", now=now) == 0
    assert rate_limit_consume(account_key="user:1", spans=5, now=now) == 0
    assert rate_limit_wait(account_key="user:1", now=now) == 3
    assert rate_limit_wait(account_key="user:1", now=now + WINDOW_S) == 0


# --- Nesting ---------------------------------------------------------------------------


def deep_array(levels: int, inner: str = "1") -> str:
    return "[" * levels + inner + "]" * levels


def deep_object(levels: int) -> str:
    return '{"a":' * levels + "1" + "}" * levels


def otlp_with_attribute(value: str, *, resource_spans: str = "resourceSpans") -> bytes:
    span = (
        f'{{"traceId":"{TRACE_HEX}","spanId":"1111111111111111","name":"op",'
        f'"startTimeUnixNano":"1","endTimeUnixNano":"2",'
        f'"attributes":[{{"key":"k","value":{value}}}]}}'
    )
    scope = "scopeSpans" if resource_spans == "resourceSpans" else "scope_spans"
    return f'{{"{resource_spans}":[{{"{scope}":[{{"spans":[{span}]}}]}}]}}'.encode()


def otlp_nested_arrays(levels: int) -> str:
    return '{"arrayValue":{"values":[' * levels + '{"intValue":1}' + "]}}" * levels


def otlp_nested_kvlists(levels: int) -> str:
    opening = '{"kvlistValue":{"values":[{"key":"k","value":'
    return opening * levels + '{"intValue":1}' + "}]}}" * levels


def native_with(attributes: str = "{}", *, resource: str = "{}", extra: str = "") -> bytes:
    span = (
        f'{{"trace_id":"{TRACE_HEX}","span_id":"1111111111111111","name":"op",'
        f'"start":1,"end":2,"attributes":{attributes}}}'
    )
    return f'{{"resource":{resource},"spans":[{span}]{extra}}}'.encode()


DEEP_BODIES = [
    pytest.param(OTLP, deep_array(DEEP).encode(), id="otlp top level"),
    pytest.param(
        OTLP, f'{{"x":{deep_array(DEEP)},"resourceSpans":[]}}'.encode(), id="otlp unknown field"
    ),
    pytest.param(
        OTLP, otlp_with_attribute(otlp_nested_arrays(DEEP // 3)), id="otlp attribute array"
    ),
    pytest.param(OTLP, otlp_with_attribute(otlp_nested_kvlists(DEEP // 4)), id="otlp kvlist"),
    pytest.param(
        OTLP,
        otlp_with_attribute(otlp_nested_kvlists(DEEP // 4), resource_spans="resource_spans"),
        id="otlp snake case kvlist",
    ),
    pytest.param(NATIVE, deep_array(DEEP).encode(), id="native top level"),
    pytest.param(NATIVE, native_with(extra=f',"x":{deep_array(DEEP)}'), id="native unknown field"),
    pytest.param(NATIVE, native_with(f'{{"a":{deep_array(DEEP)}}}'), id="native attribute array"),
    pytest.param(NATIVE, native_with(deep_object(DEEP)), id="native nested objects"),
    pytest.param(NATIVE, native_with(resource=deep_object(DEEP)), id="native resource"),
]


@pytest.mark.parametrize(("url", "body"), DEEP_BODIES)
def test_json_nested_thousands_deep_gets_400_naming_the_limit(
    token: str, url: str, body: bytes
) -> None:
    response = post(url, body, content_type=JSON, token=token)

    assert response.status_code == 400
    assert response["Content-Type"] == JSON
    message = refusal_of(response)
    assert f"deeper than {MAX_JSON_DEPTH} levels" in message
    if url == OTLP:
        assert status_of(response)[0] == RpcCode.INVALID_ARGUMENT
    else:
        assert native_error(response)[0] == "invalid_body"
    assert_nothing_written()


@pytest.mark.parametrize(
    ("url", "body"),
    [
        pytest.param(OTLP, otlp_with_attribute(otlp_nested_kvlists(100)), id="otlp kvlist"),
        pytest.param(NATIVE, native_with(deep_object(MAX_JSON_DEPTH)), id="native objects"),
    ],
)
def test_json_just_past_the_limit_is_refused_too(token: str, url: str, body: bytes) -> None:
    response = post(url, body, content_type=JSON, token=token)

    assert response.status_code == 400
    assert f"deeper than {MAX_JSON_DEPTH} levels" in refusal_of(response)
    assert_nothing_written()


def test_nested_attributes_within_the_limit_are_flattened_and_kept(token: str) -> None:
    # Five levels of the batch plus 59 of objects: exactly the limit.
    body = native_with(deep_object(MAX_JSON_DEPTH - 5))

    response = post(NATIVE, body, content_type=JSON, token=token)

    assert response.status_code == 200
    assert response.json()["accepted"] == 1
    (span,) = batch_spans(RawBatch.objects.get())
    assert ".".join(["a"] * (MAX_JSON_DEPTH - 5)) in span[11]


def test_brackets_inside_strings_are_not_nesting(token: str) -> None:
    name = "[{" * 500 + '\\""' + "]" * 10  # deeper than the nesting limit, within the name's
    body = otlp_json_batch(otlp_json_span("11" * 8, name=name))

    response = post(OTLP, body, content_type=JSON, token=token)

    assert response.status_code == 200
    assert RawBatch.objects.get().span_count == 1


# --- Authorization headers -------------------------------------------------------------

MALFORMED_AUTHORIZATION = malformed_authorization("lbi_")


@pytest.mark.parametrize("authorization", MALFORMED_AUTHORIZATION)
def test_a_malformed_authorization_header_gets_401_on_otlp(
    world: TeamWorld, authorization: str
) -> None:
    with CaptureQueriesContext(connection) as queries:
        response = post(OTLP, protobuf_batch(), headers={"Authorization": authorization})

    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Bearer"
    assert status_of(response)[0] == RpcCode.UNAUTHENTICATED
    assert not [q for q in queries.captured_queries if "teams_ingesttoken" in q["sql"]]
    assert_nothing_written()


@pytest.mark.parametrize("authorization", MALFORMED_AUTHORIZATION)
def test_a_malformed_authorization_header_gets_401_on_the_native_endpoint(
    world: TeamWorld, authorization: str
) -> None:
    with CaptureQueriesContext(connection) as queries:
        response = post(
            NATIVE,
            native_batch(native_span("1111111111111111")),
            content_type=JSON,
            headers={"Authorization": authorization},
        )

    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Bearer"
    assert native_error(response)[0] == "authentication_failed"
    assert not [q for q in queries.captured_queries if "teams_ingesttoken" in q["sql"]]
    assert_nothing_written()
