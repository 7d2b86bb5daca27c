import json
import re
from pathlib import Path
from typing import Any

import pytest

from apps.ingest.decoding import DecodeError, Reason, decode_otlp_json, decode_otlp_protobuf
from tests.builders.otlp_samples import SAMPLE_RECORDS, by_span_id, sample_spans
from tests.builders.spans import T0, encode

SAMPLE = (Path(__file__).parent / "sample_otlp.json").read_bytes()


def _body(*spans: dict[str, Any], resource: list[Any] | None = None) -> bytes:
    resource_spans = {
        "resource": {"attributes": resource or []},
        "scopeSpans": [{"scope": {"name": "s"}, "spans": list(spans)}],
    }
    return json.dumps({"resourceSpans": [resource_spans]}).encode()


def _span(**fields: Any) -> dict[str, Any]:
    span: dict[str, Any] = {
        "traceId": "0102030405060708090a0b0c0d0e0f10",
        "spanId": "0102030405060708",
        "name": "op",
        "startTimeUnixNano": str(T0),
        "endTimeUnixNano": str(T0 + 1000),
    }
    span.update(fields)
    return span


def _attributes(value: dict[str, Any]) -> dict[str, Any]:
    [record] = decode_otlp_json(_body(_span(attributes=[{"key": "a", "value": value}]))).spans
    return record.attributes


def test_hand_written_json_decodes_to_the_same_records_as_the_sdk_protobuf() -> None:
    from_json = decode_otlp_json(SAMPLE)
    from_protobuf = decode_otlp_protobuf(encode(sample_spans()))

    assert from_json.rejected == 0
    assert by_span_id(from_json.spans) == SAMPLE_RECORDS
    assert by_span_id(from_json.spans) == by_span_id(from_protobuf.spans)


def test_snake_case_field_names_are_accepted() -> None:
    snake = re.sub(rb'"([a-z]+[A-Z][A-Za-z]*)":', lambda m: _snake(m.group(0)), SAMPLE)
    assert b'"resource_spans"' in snake
    assert b'"start_time_unix_nano"' in snake

    assert by_span_id(decode_otlp_json(snake).spans) == SAMPLE_RECORDS


def _snake(key: bytes) -> bytes:
    return re.sub(rb"([A-Z])", lambda m: b"_" + m.group(1).lower(), key)


def test_enum_names_are_accepted_as_well_as_integers() -> None:
    body = _body(_span(kind="SPAN_KIND_CONSUMER", status={"code": "STATUS_CODE_ERROR"}))

    [record] = decode_otlp_json(body).spans

    assert (record.kind, record.status) == ("consumer", "error")


def test_an_unknown_kind_name_rejects_the_span() -> None:
    result = decode_otlp_json(_body(_span(kind="SPAN_KIND_WHATEVER"), _span(kind=5)))

    assert result.reasons == {Reason.KIND: 1}
    assert [record.kind for record in result.spans] == ["consumer"]


def test_nulls_and_missing_fields_take_default_values() -> None:
    body = _body(
        _span(
            parentSpanId=None,
            kind=None,
            status=None,
            attributes=None,
            events=None,
            droppedLinks=None,
        ),
        resource=None,
    )

    [record] = decode_otlp_json(body).spans

    assert record.parent_span_id is None
    assert (record.kind, record.status, record.status_message) == ("unspecified", "unset", "")
    assert (record.attributes, record.events, record.service) == ({}, [], "unknown_service")


def test_ids_are_case_insensitive_hex_and_base64_is_read_too() -> None:
    body = _body(
        _span(traceId="AbCdEf0102030405060708090A0B0C0D", parentSpanId="0000000000000000"),
        _span(traceId="AQIDBAUGBwgJCgsMDQ4PEA==", spanId="AQIDBAUGBwg="),
    )

    upper, base64 = decode_otlp_json(body).spans

    assert upper.trace_id == bytes.fromhex("abcdef0102030405060708090a0b0c0d")
    assert upper.parent_span_id is None
    assert base64.trace_id == bytes(range(1, 17))
    assert base64.span_id == bytes(range(1, 9))


def test_each_invalid_span_is_rejected_alone_and_counted_by_reason() -> None:
    body = _body(
        _span(name="kept"),
        _span(traceId="zz" * 16),
        _span(traceId="00" * 16),
        _span(traceId="0102"),
        _span(spanId="00" * 8),
        _span(spanId=None),
        _span(parentSpanId="not hex!"),
        _span(name=""),
        _span(endTimeUnixNano=str(T0 - 1)),
        _span(startTimeUnixNano=None),
    )

    result = decode_otlp_json(body)

    assert [record.name for record in result.spans] == ["kept"]
    assert result.rejected == 9
    assert result.reasons == {
        Reason.TRACE_ID: 3,
        Reason.SPAN_ID: 2,
        Reason.PARENT_ID: 1,
        Reason.NAME: 1,
        Reason.END_BEFORE_START: 1,
        Reason.TIME: 1,
    }


def test_attribute_value_types() -> None:
    assert _attributes({"doubleValue": 1}) == {"a": 1.0}
    assert _attributes({"doubleValue": "NaN"}) == {"a": "NaN"}
    assert _attributes({"doubleValue": "-Infinity"}) == {"a": "-Infinity"}
    assert _attributes({"intValue": "-9223372036854775808"}) == {"a": -(2**63)}
    assert _attributes({"bytesValue": "__4"}) == {"a": "fffe"}  # URL-safe, unpadded
    assert _attributes({"stringValue": ""}) == {"a": ""}
    assert _attributes({}) == {}
    assert _attributes({"arrayValue": {}}) == {"a": []}
    assert _attributes(
        {"arrayValue": {"values": [{"kvlistValue": {"values": [{"key": "x", "value": {}}]}}]}}
    ) == {"a": [{"x": None}]}
    assert (
        _attributes(
            {"kvlistValue": {"values": [{"key": "b", "value": {"kvlistValue": {"values": []}}}]}}
        )
        == {}
    )


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"{", id="truncated"),
        pytest.param(b"[]", id="not an object"),
        pytest.param(b"\xff\xfe", id="not utf-8"),
        pytest.param(b'{"resourceSpans": {}}', id="object for array"),
        pytest.param(_body(_span(name=5)), id="number for string"),
        pytest.param(_body(_span(startTimeUnixNano=1.5e18)), id="float time"),
        pytest.param(_body(_span(startTimeUnixNano="soon")), id="non-numeric time"),
        pytest.param(_body(_span(kind=True)), id="bool kind"),
        pytest.param(_body(_span(attributes={"a": 1})), id="map for attributes"),
    ],
)
def test_an_undecodable_body_raises_decode_error(body: bytes) -> None:
    with pytest.raises(DecodeError):
        decode_otlp_json(body)


@pytest.mark.parametrize(
    "value",
    [{"intValue": "12x"}, {"doubleValue": "fast"}, {"bytesValue": "%%%"}, {"boolValue": "yes"}],
)
def test_a_malformed_attribute_value_raises_decode_error(value: dict[str, Any]) -> None:
    with pytest.raises(DecodeError):
        _attributes(value)


def test_an_empty_request_decodes_to_no_spans() -> None:
    assert decode_otlp_json(b"{}").spans == []
    assert decode_otlp_json(b'{"resourceSpans": [{"scopeSpans": [{}]}]}').spans == []
