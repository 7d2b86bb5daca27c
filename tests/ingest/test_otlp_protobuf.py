import math
from typing import Any, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from apps.ingest.decoding import DecodeError, Reason, decode_otlp_protobuf
from apps.ingest.decoding.otlp_schema import RawExportTraceServiceRequest
from tests.builders.otlp_samples import ROOT_ID, SAMPLE_RECORDS, by_span_id, sample_spans
from tests.builders.spans import T0, encode, span
from tests.timing import MS


def _sdk_value(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def test_spans_from_a_real_tracer_decode_field_for_field() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "rag-api"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("rag.pipeline", "0.3.0")
    with tracer.start_as_current_span("POST /ask", kind=SpanKind.SERVER) as root:
        root.set_attribute("http.response.status_code", 200)
        with tracer.start_as_current_span("retrieval", kind=SpanKind.CLIENT) as child:
            child.set_attribute("openinference.span.kind", "RETRIEVER")
            child.set_attribute("retrieval.scores", [0.9, 0.7])
            child.add_event("cache_miss", {"cache.key": "q:42"})
            child.set_status(StatusCode.ERROR, "index offline")
    finished = exporter.get_finished_spans()

    result = decode_otlp_protobuf(encode(list(finished)))

    assert result.rejected == 0
    assert len(result.spans) == 2
    records = {record.span_id: record for record in result.spans}
    for sdk_span in finished:
        record = records[sdk_span.context.span_id.to_bytes(8, "big")]
        assert record.trace_id == sdk_span.context.trace_id.to_bytes(16, "big")
        parent = sdk_span.parent.span_id.to_bytes(8, "big") if sdk_span.parent else None
        assert record.parent_span_id == parent
        assert record.name == sdk_span.name
        assert record.service == "rag-api"
        assert record.kind == sdk_span.kind.name.lower()
        assert (record.start_ns, record.end_ns) == (sdk_span.start_time, sdk_span.end_time)
        assert record.status == sdk_span.status.status_code.name.lower()
        assert record.status_message == (sdk_span.status.description or "")
        attributes = sdk_span.attributes or {}
        assert record.attributes == {k: _sdk_value(v) for k, v in attributes.items()}
        assert record.resource == dict(sdk_span.resource.attributes)
        assert record.scope_name == "rag.pipeline"
        assert [(e.name, e.time_ns, e.attributes) for e in record.events] == [
            (e.name, e.timestamp, dict(e.attributes or {})) for e in sdk_span.events
        ]


def test_sample_spans_decode_to_the_expected_records() -> None:
    result = decode_otlp_protobuf(encode(sample_spans()))

    assert result.rejected == 0
    assert result.errors == []
    assert by_span_id(result.spans) == SAMPLE_RECORDS


def test_unusual_attribute_values_survive_the_fast_path(settings) -> None:
    # Within the span budget here: this is about decoding (see test_span_limits.py).
    settings.INGEST_MAX_ATTRIBUTE_KEY_LENGTH = 1000
    settings.INGEST_MAX_ATTRIBUTE_VALUE_LENGTH = 100_000
    long_key = "k" * 300
    long_value = "é" * 20_000  # a three-byte length prefix
    sent = span(
        0xABC,
        name="odd",
        attributes={
            long_key: long_value,
            "negative": -5,
            "int64.max": 2**63 - 1,
            "int64.min": -(2**63),
            "empty": "",
            "zero": 0,
            "false": False,
            "nan": math.nan,
            "inf": math.inf,
            "minus.inf": -math.inf,
            "nothing": None,
            "mixed": ["a", 1, 2.5, True, b"\x00"],
            "nested": [{"a": 1}, ["x"]],
            "deep": {"a": {"b": {"c": "d"}}},
            "empty.map": {},
        },
    )

    [record] = decode_otlp_protobuf(encode([sent])).spans

    assert record.attributes == {
        long_key: long_value,
        "negative": -5,
        "int64.max": 2**63 - 1,
        "int64.min": -(2**63),
        "empty": "",
        "zero": 0,
        "false": False,
        "nan": "NaN",
        "inf": "Infinity",
        "minus.inf": "-Infinity",
        "mixed": ["a", 1, 2.5, True, "00"],
        "nested": [{"a": 1}, ["x"]],
        "deep.a.b.c": "d",
    }


scalars = st.one_of(
    st.text(max_size=200),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False),
    st.booleans(),
)


@given(
    attributes=st.dictionaries(
        # gen_ai.* names get normalised; covered by their own tests
        st.text(min_size=1, max_size=150).filter(lambda key: not key.startswith("gen_ai.")),
        st.one_of(scalars, st.lists(st.text(max_size=5), max_size=3)),
        max_size=8,
    )
)
def test_any_scalar_or_list_attribute_round_trips(attributes: dict[str, Any]) -> None:
    sent = span(0xABC, name="s", attributes=attributes)

    [record] = decode_otlp_protobuf(encode([sent])).spans

    expected = {
        key: ("Infinity" if value > 0 else "-Infinity")
        if isinstance(value, float) and math.isinf(value)
        else value
        for key, value in attributes.items()
    }
    assert record.attributes == expected


def test_repeated_pairs_across_spans_decode_the_same() -> None:
    spans = [
        span(0x100 + i, name=f"s{i}", attributes={"model": "gpt-4o", "n": 7}) for i in range(3)
    ]

    result = decode_otlp_protobuf(encode(spans))

    assert [record.attributes for record in result.spans] == [{"model": "gpt-4o", "n": 7}] * 3
    assert result.spans[0].attributes is not result.spans[1].attributes


def test_deprecated_genai_names_are_copied_to_the_current_ones() -> None:
    sent = span(
        0xABC,
        name="chat",
        attributes={"gen_ai.system": "anthropic", "gen_ai.usage.prompt_tokens": 10},
    )

    [record] = decode_otlp_protobuf(encode([sent])).spans

    assert record.attributes["gen_ai.provider.name"] == "anthropic"
    assert record.attributes["gen_ai.usage.input_tokens"] == 10
    assert record.attributes["gen_ai.system"] == "anthropic"
    assert "gen_ai.usage.output_tokens" not in record.attributes


def test_current_genai_names_win_over_deprecated_ones() -> None:
    sent = span(
        0xABC,
        name="chat",
        attributes={
            "gen_ai.system": "openai",
            "gen_ai.provider.name": "azure.ai.openai",
            "gen_ai.usage.completion_tokens": 5,
            "gen_ai.usage.output_tokens": 6,
        },
    )

    [record] = decode_otlp_protobuf(encode([sent])).spans

    assert record.attributes["gen_ai.provider.name"] == "azure.ai.openai"
    assert record.attributes["gen_ai.usage.output_tokens"] == 6


def _pb_span(**fields: Any) -> Span:
    values: dict[str, Any] = {
        "trace_id": b"\x01" * 16,
        "span_id": b"\x02" * 8,
        "name": "ok",
        "start_time_unix_nano": T0,
        "end_time_unix_nano": T0 + MS,
    }
    values.update(fields)
    return Span(**values)


def _request(*spans: Span) -> bytes:
    request = ExportTraceServiceRequest(
        resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=list(spans))])]
    )
    return request.SerializeToString()


def test_each_invalid_span_is_rejected_alone_and_counted_by_reason() -> None:
    body = _request(
        _pb_span(name="kept"),
        _pb_span(trace_id=b"\x01" * 15),
        _pb_span(trace_id=bytes(16)),
        _pb_span(trace_id=b""),
        _pb_span(span_id=b"\x02" * 7),
        _pb_span(span_id=bytes(8)),
        _pb_span(parent_span_id=b"\x03" * 5),
        _pb_span(name=""),
        _pb_span(end_time_unix_nano=T0 - 1),
        _pb_span(start_time_unix_nano=0),
        _pb_span(start_time_unix_nano=2**63, end_time_unix_nano=2**64 - 1),
        _pb_span(name="also kept", parent_span_id=bytes(8)),
    )

    result = decode_otlp_protobuf(body)

    assert [record.name for record in result.spans] == ["kept", "also kept"]
    assert result.spans[1].parent_span_id is None
    assert result.rejected == 10
    assert result.reasons == {
        Reason.TRACE_ID: 3,
        Reason.SPAN_ID: 2,
        Reason.PARENT_ID: 1,
        Reason.NAME: 1,
        Reason.END_BEFORE_START: 1,
        Reason.TIME: 2,
    }
    assert result.errors[:2] == ["span 1: invalid trace id", "span 2: invalid trace id"]
    assert len(result.errors) == 5
    assert result.error_message.startswith("rejected 10 spans: invalid trace id (3), ")


def test_unknown_kind_and_status_values_fall_back_to_unspecified_and_unset() -> None:
    body = _request(_pb_span(kind=9, status=Status(code=cast(Any, 7), message="?")))

    [record] = decode_otlp_protobuf(body).spans

    assert (record.kind, record.status, record.status_message) == ("unspecified", "unset", "?")


def test_an_empty_request_decodes_to_no_spans() -> None:
    result = decode_otlp_protobuf(b"")

    assert (result.spans, result.rejected, result.error_message) == ([], 0, "")


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"\xff\xff\xff\xff", id="garbage"),
        pytest.param(_request(_pb_span(name="x" * 50))[:-7], id="truncated"),
        pytest.param(b'{"resourceSpans": []}', id="json sent as protobuf"),
    ],
)
def test_an_undecodable_body_raises_decode_error(body: bytes) -> None:
    with pytest.raises(DecodeError, match="invalid ExportTraceServiceRequest"):
        decode_otlp_protobuf(body)


def _with_raw_attribute(raw_key_value: bytes) -> bytes:
    request = RawExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id, span.span_id, span.name = b"\x01" * 16, b"\x02" * 8, "s"
    span.start_time_unix_nano, span.end_time_unix_nano = T0, T0 + 1
    span.attributes.append(raw_key_value)
    return bytes(request.SerializeToString())


def test_invalid_utf8_in_an_attribute_raises_decode_error() -> None:
    body = _with_raw_attribute(b"\x0a\x02\xff\xfe\x12\x03\x0a\x01a")

    with pytest.raises(DecodeError):
        decode_otlp_protobuf(body)


def test_invalid_utf8_in_a_span_name_raises_decode_error() -> None:
    body = _request(_pb_span(name="AB")).replace(b"AB", b"\xff\xfe")

    with pytest.raises(DecodeError, match="UTF-8"):
        decode_otlp_protobuf(body)


def test_a_corrupt_attribute_raises_decode_error() -> None:
    body = _with_raw_attribute(b"\x0a\x05ab")

    with pytest.raises(DecodeError):
        decode_otlp_protobuf(body)


def test_a_non_canonical_attribute_layout_still_decodes() -> None:
    # value before key, and an unknown field 7 inside the AnyValue
    body = _with_raw_attribute(b"\x12\x04\x18\x07\x38\x01\x0a\x01k")

    [record] = decode_otlp_protobuf(body).spans

    assert record.attributes == {"k": 7}


def test_spans_share_their_resource_attributes() -> None:
    spans = [span(1, name="a"), span(2, ROOT_ID, name="b")]

    first, second = decode_otlp_protobuf(encode(spans)).spans

    assert first.resource is second.resource
