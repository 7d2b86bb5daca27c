"""The OTLP/protobuf decoder answers any body with span records or a DecodeError."""

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue, KeyValueList
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status

from apps.ingest.decoding import DecodeError, decode_otlp_protobuf
from tests.fuzz.conftest import FUZZ
from tests.fuzz.properties import decoded, roughly_linear_check
from tests.fuzz.protobuf_bodies import (
    PLACEHOLDER,
    SURROGATE_BYTES,
    export_requests,
    valid_spans,
)

pytestmark = pytest.mark.fuzz


def _span(**fields: Any) -> Span:
    """A valid span with fixed ids and times; ``fields`` sets or overrides the rest."""
    return Span(
        **{
            "trace_id": b"\x01" * 16,
            "span_id": b"\x02" * 8,
            "name": "op",
            "start_time_unix_nano": 1,
            "end_time_unix_nano": 2,
            **fields,
        }
    )


def _request(*spans: Span, resource: Resource | None = None) -> ExportTraceServiceRequest:
    return ExportTraceServiceRequest(
        resource_spans=[ResourceSpans(resource=resource, scope_spans=[ScopeSpans(spans=spans)])]
    )


@FUZZ
@given(st.binary(max_size=2000))
def test_any_bytes_decode_or_are_refused(body: bytes) -> None:
    decoded(decode_otlp_protobuf, body)


@FUZZ
@given(export_requests())
def test_every_span_of_a_drawn_request_is_accepted_or_counted_as_rejected(
    drawn: tuple[ExportTraceServiceRequest, int],
) -> None:
    request, count = drawn

    result = decoded(decode_otlp_protobuf, request.SerializeToString())

    assert result is not None
    assert len(result.spans) + result.rejected == count


@FUZZ
@given(st.lists(valid_spans(), min_size=1, max_size=5))
def test_valid_spans_are_all_accepted_with_their_ids(spans: list[Span]) -> None:
    result = decoded(decode_otlp_protobuf, _request(*spans).SerializeToString())

    assert result is not None
    assert result.rejected == 0
    assert [(r.trace_id, r.span_id) for r in result.spans] == [
        (s.trace_id, s.span_id) for s in spans
    ]
    assert [(r.start_ns, r.end_ns) for r in result.spans] == [
        (s.start_time_unix_nano, s.end_time_unix_nano) for s in spans
    ]


def _with_placeholder(place: str) -> ExportTraceServiceRequest:
    text_value = AnyValue(string_value=PLACEHOLDER)
    span = _span(
        name=PLACEHOLDER if place == "name" else "op",
        status=Status(message=PLACEHOLDER if place == "status" else ""),
        events=[Span.Event(name=PLACEHOLDER)] if place == "event" else [],
        attributes={
            "key": [KeyValue(key=PLACEHOLDER, value=AnyValue(int_value=1))],
            "value": [KeyValue(key="k", value=text_value)],
            "nested": [
                KeyValue(
                    key="k",
                    value=AnyValue(
                        kvlist_value=KeyValueList(values=[KeyValue(key="x", value=text_value)])
                    ),
                )
            ],
        }.get(place, []),
    )
    resource = Resource(
        attributes=[KeyValue(key="service.name", value=text_value)] if place == "resource" else []
    )
    return _request(span, resource=resource)


@FUZZ
@given(st.sampled_from(["name", "status", "event", "key", "value", "nested", "resource"]))
def test_a_string_that_is_not_utf8_refuses_the_body(place: str) -> None:
    body = _with_placeholder(place).SerializeToString()
    assert body.count(PLACEHOLDER.encode()) == 1

    with pytest.raises(DecodeError):
        decode_otlp_protobuf(body.replace(PLACEHOLDER.encode(), SURROGATE_BYTES))


@st.composite
def _mutations(draw: st.DrawFn) -> bytes:
    request, _ = draw(export_requests())
    body = bytearray(request.SerializeToString())
    for _ in range(draw(st.integers(1, 4))):
        action = draw(st.sampled_from(["flip", "truncate", "insert", "delete", "splice"]))
        at = draw(st.integers(0, len(body)))
        if action == "flip" and at < len(body):
            body[at] ^= 1 << draw(st.integers(0, 7))
        elif action == "truncate":
            del body[at:]
        elif action == "insert":
            body[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif action == "delete":
            del body[at : at + draw(st.integers(1, 8))]
        else:
            end = draw(st.integers(at, len(body)))
            body[at:at] = body[at:end]
    return bytes(body)


@FUZZ
@given(_mutations())
def test_a_mangled_request_decodes_or_is_refused(body: bytes) -> None:
    decoded(decode_otlp_protobuf, body)


def _deep_kvlist(depth: int) -> AnyValue:
    value = AnyValue(int_value=1)
    for level in range(depth):
        value = AnyValue(kvlist_value=KeyValueList(values=[KeyValue(key=f"k{level}", value=value)]))
    return value


def test_decoding_time_grows_linearly_with_spans_of_deeply_nested_attributes() -> None:
    def body(spans: int) -> bytes:
        span = _span(
            attributes=[KeyValue(key=f"a{i}", value=_deep_kvlist(20)) for i in range(8)],
        )
        return _request(*[span] * spans).SerializeToString()

    small, large = body(100), body(800)

    roughly_linear_check(decode_otlp_protobuf, small, large, factor=8)


def test_a_long_key_over_many_nested_values_is_not_copied_into_each() -> None:
    # A megabyte of key over 200 values: 200 MB of dotted keys if each got a copy, and
    # a body of a few megabytes would make gigabytes.
    nested = KeyValueList(
        values=[KeyValue(key=f"v{i}", value=AnyValue(int_value=i)) for i in range(200)]
    )
    span = _span(
        attributes=[KeyValue(key="k" * 1_000_000, value=AnyValue(kvlist_value=nested))],
    )

    result = decoded(decode_otlp_protobuf, _request(span).SerializeToString())

    assert result is not None
    assert sum(map(len, (key for s in result.spans for key in s.attributes))) < 10_000
