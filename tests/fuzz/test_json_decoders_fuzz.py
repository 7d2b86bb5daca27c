"""The OTLP/JSON and native JSON decoders answer any body with span records or a DecodeError."""

import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apps.ingest.decoding import DecodeError, DecodeResult, decode_native_json, decode_otlp_json
from apps.ingest.decoding.json_depth import MAX_JSON_DEPTH
from tests.fuzz.conftest import FUZZ
from tests.fuzz.json_bodies import (
    json_values,
    native_documents,
    otlp_json_documents,
    valid_hex_ids,
)
from tests.fuzz.mutations import mutated
from tests.fuzz.properties import decoded, roughly_linear_check

pytestmark = pytest.mark.fuzz

Decoder = Callable[[bytes], DecodeResult]
DECODERS = pytest.mark.parametrize(
    "decode", [decode_otlp_json, decode_native_json], ids=["otlp_json", "native_json"]
)
# Bytes that can never stand in UTF-8: a stray continuation, a lead without its tail, an
# encoded surrogate, an overlong slash, bytes past U+10FFFF.
NOT_UTF8 = [b"\x80", b"\xc3", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf5\x80\x80\x80", b"\xff"]


def _body(document: Any) -> bytes:
    return json.dumps(document, ensure_ascii=False).encode()


@FUZZ
@DECODERS
@given(value=json_values)
def test_any_json_value_decodes_or_is_refused(decode: Decoder, value: Any) -> None:
    decoded(decode, _body(value))


@FUZZ
@DECODERS
@given(body=st.binary(max_size=1000))
def test_any_bytes_decode_or_are_refused(decode: Decoder, body: bytes) -> None:
    decoded(decode, body)


@FUZZ
@DECODERS
@given(data=st.data(), bad=st.sampled_from(NOT_UTF8))
def test_a_body_that_is_not_utf8_decodes_or_is_refused(
    decode: Decoder, data: st.DataObject, bad: bytes
) -> None:
    documents = otlp_json_documents() if decode is decode_otlp_json else native_documents()
    body = _body(data.draw(documents)[0])
    at = data.draw(st.integers(0, len(body)))

    decoded(decode, body[:at] + bad + body[at:])


@FUZZ
@given(otlp_json_documents())
def test_every_span_of_an_otlp_json_document_is_accepted_or_counted_as_rejected(
    drawn: tuple[dict[str, Any], int],
) -> None:
    document, count = drawn

    result = decoded(decode_otlp_json, _body(document))

    assert result is not None
    assert len(result.spans) + result.rejected == count


@FUZZ
@given(native_documents())
def test_every_span_of_a_native_batch_is_accepted_or_counted_as_rejected(
    drawn: tuple[dict[str, Any], int],
) -> None:
    document, count = drawn

    result = decoded(decode_native_json, _body(document))

    assert result is not None
    assert len(result.spans) + result.rejected == count


@FUZZ
@given(mutated(otlp_json_documents().map(lambda drawn: drawn[0])))
def test_an_otlp_json_document_with_wrong_types_decodes_or_is_refused(document: Any) -> None:
    decoded(decode_otlp_json, _body(document))


@FUZZ
@given(mutated(native_documents().map(lambda drawn: drawn[0])))
def test_a_native_batch_with_wrong_types_decodes_or_is_refused(document: Any) -> None:
    decoded(decode_native_json, _body(document))


def _nested(depth: int, kinds: list[bool], leaf: Any = 1) -> Any:
    value = leaf
    for level in range(depth):
        value = {"k": value} if kinds[level % len(kinds)] else [value]
    return value


def _deep_otlp(value: Any) -> dict[str, Any]:
    span = {
        "traceId": "01" * 16,
        "spanId": "02" * 8,
        "name": "op",
        "startTimeUnixNano": 1,
        "endTimeUnixNano": 2,
        "attributes": [{"key": "deep", "value": value}],
    }
    return {"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}


def _deep_native(value: Any) -> dict[str, Any]:
    span = {"trace_id": "01" * 16, "span_id": "02" * 8, "name": "op", "start": 1, "end": 2}
    return {"spans": [{**span, "attributes": {"deep": value}}]}


@FUZZ
@DECODERS
@given(
    depth=st.integers(0, 3 * MAX_JSON_DEPTH), kinds=st.lists(st.booleans(), min_size=1, max_size=4)
)
def test_deep_nesting_decodes_or_is_refused_never_recursing_out(
    decode: Decoder, depth: int, kinds: list[bool]
) -> None:
    wrap = _deep_otlp if decode is decode_otlp_json else _deep_native
    body = _body(wrap(_nested(depth, kinds)))

    result = decoded(decode, body)

    if depth > MAX_JSON_DEPTH:
        assert result is None


@DECODERS
def test_nesting_far_past_the_limit_is_refused_at_once(decode: Decoder) -> None:
    for body in (b"[" * 200_000, b'{"a":' * 200_000, b"[" * 100_000 + b"]" * 100_000):
        with pytest.raises(DecodeError):
            decode(body)


@FUZZ
@given(st.lists(st.tuples(valid_hex_ids(16), valid_hex_ids(8)), min_size=1, max_size=5))
def test_ids_in_hex_of_either_case_or_base64_decode_to_the_same_bytes(
    ids: list[tuple[str, str]],
) -> None:
    import base64

    def spans(style: Callable[[str], str]) -> list[dict[str, Any]]:
        return [
            {
                "traceId": style(trace_id),
                "spanId": style(span_id),
                "name": "op",
                "startTimeUnixNano": "1",
                "endTimeUnixNano": 2,
            }
            for trace_id, span_id in ids
        ]

    def as_base64(text: str) -> str:
        return base64.b64encode(bytes.fromhex(text)).decode()

    results = [
        decoded(decode_otlp_json, _body({"resourceSpans": [{"scopeSpans": [{"spans": spans(s)}]}]}))
        for s in (str, str.upper, as_base64)
    ]

    expected = [(bytes.fromhex(t), bytes.fromhex(s)) for t, s in ids]
    for result in results:
        assert result is not None
        ok = [(span.trace_id, span.span_id) for span in result.spans]
        assert ok == [pair for pair in expected if any(pair[0]) and any(pair[1])]


def _many_spans_otlp(count: int) -> bytes:
    span = {
        "traceId": "01" * 16,
        "spanId": "02" * 8,
        "name": "op",
        "startTimeUnixNano": "1",
        "endTimeUnixNano": "2",
        "attributes": [{"key": f"a{i}", "value": {"stringValue": "v"}} for i in range(8)],
    }
    return _body({"resourceSpans": [{"scopeSpans": [{"spans": [span] * count}]}]})


def _many_spans_native(count: int) -> bytes:
    span = {
        "trace_id": "01" * 16,
        "span_id": "02" * 8,
        "name": "op",
        "start": "2025-10-09T08:53:20.123456789Z",
        "end": 2_000_000_000_000_000_000,
        "attributes": {f"a{i}": {"b": [1, "x"]} for i in range(8)},
    }
    return _body({"spans": [span] * count})


@pytest.mark.parametrize(
    ("decode", "body"),
    [(decode_otlp_json, _many_spans_otlp), (decode_native_json, _many_spans_native)],
    ids=["otlp_json", "native_json"],
)
def test_decoding_time_grows_linearly_with_the_spans(
    decode: Decoder, body: Callable[[int], bytes]
) -> None:
    roughly_linear_check(decode, body(300), body(2400), factor=8)


@DECODERS
def test_decoding_time_grows_linearly_with_escapes_and_brackets_inside_strings(
    decode: Decoder,
) -> None:
    # The depth guard walks the raw bytes: escaped quotes and brackets in strings are its
    # hardest input.
    def body(count: int) -> bytes:
        name = '\\"[{' * count + "\\\\" * count
        wrap = _deep_otlp if decode is decode_otlp_json else _deep_native
        return _body(wrap({"stringValue": name} if decode is decode_otlp_json else name))

    roughly_linear_check(decode, body(20_000), body(160_000), factor=8)


def test_a_bytes_value_that_is_not_ascii_is_refused() -> None:
    # binascii raises a plain ValueError for non-ASCII text, not binascii.Error.
    body = _body(_deep_otlp({"bytesValue": "AAé="}))

    with pytest.raises(DecodeError, match="bytesValue"):
        decode_otlp_json(body)


@DECODERS
def test_a_long_key_over_many_nested_values_is_not_copied_into_each(decode: Decoder) -> None:
    # A megabyte of key over 200 values: 200 MB of dotted keys if each got a copy.
    key = "k" * 1_000_000
    if decode is decode_otlp_json:
        values = [{"key": f"v{i}", "value": {"intValue": i}} for i in range(200)]
        span = _deep_otlp({"kvlistValue": {"values": values}})
        span["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"][0]["key"] = key
    else:
        span = _deep_native(None)
        span["spans"][0]["attributes"] = {key: {f"v{i}": i for i in range(200)}}

    result = decoded(decode, _body(span))

    assert result is not None
    assert sum(map(len, (key for s in result.spans for key in s.attributes))) < 10_000
