"""OTLP/protobuf export requests built with opentelemetry-proto's own classes.

Every field is drawn: ids of any length, times across the whole fixed64 range, every
AnyValue type nested, NaN and huge doubles, empty names and text from all of Unicode.
Strings protobuf refuses to hold (lone surrogates) are put on the wire by hand instead.
"""

from typing import Any, cast

from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import (
    AnyValue,
    ArrayValue,
    InstrumentationScope,
    KeyValue,
    KeyValueList,
)
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status

from tests.fuzz.json_bodies import NUMERIC_KEYS

UINT64_EDGES = [0, 1, 2**63 - 1, 2**63, 2**64 - 1]
INT32_EDGES = [-(2**31), -1, 0, 1, 2, 3, 5, 6, 2**31 - 1]

texts = st.text(max_size=20)
keys = st.one_of(st.text(max_size=20), st.sampled_from(NUMERIC_KEYS))
fixed64 = st.one_of(st.integers(0, 2**64 - 1), st.sampled_from(UINT64_EDGES))
int32 = st.one_of(st.integers(-(2**31), 2**31 - 1), st.sampled_from(INT32_EDGES))


def _any(**field: Any) -> AnyValue:
    return AnyValue(**field)


_scalars = st.one_of(
    texts.map(lambda v: _any(string_value=v)),
    st.integers(-(2**63), 2**63 - 1).map(lambda v: _any(int_value=v)),
    st.booleans().map(lambda v: _any(bool_value=v)),
    st.floats().map(lambda v: _any(double_value=v)),
    st.sampled_from([1e308, -1e308, 5e-324, float("nan"), float("inf")]).map(
        lambda v: _any(double_value=v)
    ),
    st.binary(max_size=32).map(lambda v: _any(bytes_value=v)),
    st.just(AnyValue()),
)
any_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4).map(lambda vs: _any(array_value=ArrayValue(values=vs))),
        st.lists(st.builds(KeyValue, key=keys, value=inner), max_size=4).map(
            lambda vs: _any(kvlist_value=KeyValueList(values=vs))
        ),
    ),
    max_leaves=4,
)
key_values = st.lists(st.builds(KeyValue, key=keys, value=any_values), max_size=3)


def ids(size: int) -> st.SearchStrategy[bytes]:
    return st.one_of(
        st.binary(min_size=size, max_size=size),
        st.just(bytes(size)),
        st.binary(max_size=3 * size),
    )


@st.composite
def spans(draw: st.DrawFn) -> Span:
    start, end = draw(fixed64), draw(fixed64)
    if draw(st.booleans()):
        start, end = sorted((start, end))
    return Span(
        trace_id=draw(ids(16)),
        span_id=draw(ids(8)),
        parent_span_id=draw(st.one_of(st.just(b""), ids(8))),
        name=draw(texts),
        kind=cast("Span.SpanKind.ValueType", draw(int32)),
        start_time_unix_nano=start,
        end_time_unix_nano=end,
        attributes=draw(key_values),
        events=draw(
            st.lists(
                st.builds(Span.Event, name=texts, time_unix_nano=fixed64, attributes=key_values),
                max_size=2,
            )
        ),
        status=Status(code=cast("Status.StatusCode.ValueType", draw(int32)), message=draw(texts)),
    )


@st.composite
def export_requests(draw: st.DrawFn) -> tuple[ExportTraceServiceRequest, int]:
    """A request and the number of spans it holds."""
    resource_spans = []
    count = 0
    for _ in range(draw(st.integers(0, 2))):
        scope_spans = []
        for _ in range(draw(st.integers(0, 2))):
            drawn = draw(st.lists(spans(), max_size=3))
            count += len(drawn)
            scope = InstrumentationScope(name=draw(texts), version=draw(texts))
            scope_spans.append(ScopeSpans(scope=scope, spans=drawn))
        resource = Resource(attributes=draw(key_values))
        resource_spans.append(ResourceSpans(resource=resource, scope_spans=scope_spans))
    return ExportTraceServiceRequest(resource_spans=resource_spans), count


@st.composite
def valid_spans(draw: st.DrawFn) -> Span:
    """A span every decoder must accept: good ids, a name, start <= end, small attributes."""
    start = draw(st.integers(1, 2**63 - 1))
    end = draw(st.integers(start, 2**63 - 1))
    return Span(
        trace_id=draw(st.binary(min_size=16, max_size=16).filter(any)),
        span_id=draw(st.binary(min_size=8, max_size=8).filter(any)),
        parent_span_id=draw(st.one_of(st.just(b""), st.binary(min_size=8, max_size=8).filter(any))),
        name=draw(st.text(min_size=1, max_size=40)),
        kind=cast("Span.SpanKind.ValueType", draw(st.integers(0, 5))),
        start_time_unix_nano=start,
        end_time_unix_nano=end,
        attributes=draw(key_values),
        status=Status(
            code=cast("Status.StatusCode.ValueType", draw(st.integers(0, 2))), message=draw(texts)
        ),
    )


# Three bytes each: a string field's placeholder, and the CESU-8 form of a lone
# surrogate that takes its place on the wire (valid to a lax decoder, not UTF-8).
PLACEHOLDER = "\x01\x02\x03"
SURROGATE_BYTES = "\ud800".encode("utf-8", "surrogatepass")
