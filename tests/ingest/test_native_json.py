import json
from typing import Any

import pytest

from apps.ingest.decoding import DecodeError, Reason, SpanEvent, decode_native_json
from tests.builders.spans import T0

TRACE = "5b8efff798038103d269b633813fc60c"
ROOT = "1111111111111111"


def _body(*spans: dict[str, Any], **batch: Any) -> bytes:
    return json.dumps({"spans": list(spans), **batch}).encode()


def _span(**fields: Any) -> dict[str, Any]:
    span: dict[str, Any] = {
        "trace_id": TRACE,
        "span_id": ROOT,
        "name": "POST /v1/chat",
        "start": T0,
        "end": T0 + 2_400_000_000,
    }
    span.update(fields)
    return span


def test_a_full_span_decodes_field_for_field() -> None:
    body = _body(
        _span(
            span_id="2222222222222222",
            parent_id=ROOT.upper(),
            name="chat gpt-4o",
            service="llm-gateway",
            kind="client",
            start="2025-10-09T08:53:20.62Z",
            end=T0 + 2_350_000_000,
            attributes={"gen_ai.request.model": "gpt-4o", "stream": True, "stop": ["a", "b"]},
            events=[{"name": "first_token", "time": "2025-10-09T10:53:20.98+02:00"}],
            status="error",
            status_message="upstream timeout",
        ),
        resource={"service.name": "chat-api", "deployment": {"environment": "test"}},
    )

    result = decode_native_json(body)

    assert result.rejected == 0
    [record] = result.spans
    assert record.trace_id == bytes.fromhex(TRACE)
    assert record.span_id == bytes.fromhex("2222222222222222")
    assert record.parent_span_id == bytes.fromhex(ROOT)
    assert (record.name, record.service, record.kind) == ("chat gpt-4o", "llm-gateway", "client")
    assert (record.start_ns, record.end_ns) == (T0 + 620_000_000, T0 + 2_350_000_000)
    assert (record.status, record.status_message) == ("error", "upstream timeout")
    assert record.attributes == {
        "gen_ai.request.model": "gpt-4o",
        "stream": True,
        "stop": ["a", "b"],
    }
    assert record.events == [SpanEvent("first_token", T0 + 980_000_000, {})]
    assert record.resource == {"service.name": "chat-api", "deployment.environment": "test"}
    assert record.scope_name == ""


def test_rfc3339_and_unix_nanoseconds_give_the_same_times() -> None:
    body = _body(
        _span(start=T0 + 123_456_789, end=T0 + 1_000_000_001),
        _span(start="2025-10-09T08:53:20.123456789Z", end="2025-10-09T03:53:21.000000001-05:00"),
        _span(start="2025-10-09t08:53:20.123456789z", end="2025-10-09 08:53:21.000000001+00:00"),
    )

    spans = decode_native_json(body).spans

    assert {(s.start_ns, s.end_ns) for s in spans} == {(T0 + 123_456_789, T0 + 1_000_000_001)}


def test_service_comes_from_the_span_then_the_resource_then_a_default() -> None:
    with_resource = _body(_span(service="own"), _span(), resource={"service.name": "shared"})
    without = _body(_span())

    assert [s.service for s in decode_native_json(with_resource).spans] == ["own", "shared"]
    assert decode_native_json(without).spans[0].service == "unknown_service"


def test_defaults_for_optional_fields() -> None:
    [record] = decode_native_json(_body(_span(parent_id=None))).spans

    assert record.parent_span_id is None
    assert decode_native_json(_body(_span(parent_id="0" * 16))).spans[0].parent_span_id is None
    assert (record.kind, record.status, record.status_message) == ("internal", "unset", "")
    assert (record.attributes, record.events, record.resource) == ({}, [], {})


def test_attributes_are_flattened_and_nulls_dropped() -> None:
    body = _body(_span(attributes={"http": {"route": "/x", "status": 200}, "gone": None, "n": 1.5}))

    [record] = decode_native_json(body).spans

    assert record.attributes == {"http.route": "/x", "http.status": 200, "n": 1.5}


def test_deprecated_genai_names_are_mapped() -> None:
    body = _body(_span(attributes={"gen_ai.system": "openai", "gen_ai.usage.completion_tokens": 9}))

    [record] = decode_native_json(body).spans

    assert record.attributes["gen_ai.provider.name"] == "openai"
    assert record.attributes["gen_ai.usage.output_tokens"] == 9


def test_kind_and_status_are_case_insensitive() -> None:
    [record] = decode_native_json(_body(_span(kind="SERVER", status="OK"))).spans

    assert (record.kind, record.status) == ("server", "ok")


def test_unknown_fields_are_ignored() -> None:
    body = _body(_span(links=[], colour="blue"), version=2)

    assert len(decode_native_json(body).spans) == 1


def test_each_invalid_span_is_rejected_alone_and_counted_by_reason() -> None:
    body = _body(
        _span(name="kept"),
        _span(trace_id="zz" * 16),
        _span(trace_id="0" * 32),
        _span(span_id="123"),
        _span(parent_id="12345678"),
        _span(name=""),
        _span(start="yesterday"),
        _span(start="2025-02-30T00:00:00Z"),
        _span(end="2025-10-09T08:53:20.1234567891Z"),  # ten fraction digits
        _span(start="2025-10-09T08:53:20"),  # no offset
        _span(start=-1),
        _span(end=T0 - 1),
        _span(kind="sideways"),
        _span(status="meh"),
        _span(events=[{"name": "e", "time": "later"}]),
    )

    result = decode_native_json(body)

    assert [record.name for record in result.spans] == ["kept"]
    assert result.rejected == 14
    assert result.reasons == {
        Reason.TRACE_ID: 2,
        Reason.SPAN_ID: 1,
        Reason.PARENT_ID: 1,
        Reason.NAME: 1,
        Reason.TIME: 6,
        Reason.END_BEFORE_START: 1,
        Reason.KIND: 1,
        Reason.STATUS: 1,
    }
    assert result.errors[0] == "span 1: invalid trace id"


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"{", id="truncated"),
        pytest.param(b"[]", id="not an object"),
        pytest.param(b"{}", id="no spans"),
        pytest.param(_body(_span(start=1.76e18)), id="float time"),
        pytest.param(_body(_span(start=True)), id="bool time"),
        pytest.param(_body({"span_id": ROOT, "name": "x", "start": 1, "end": 2}), id="no trace id"),
        pytest.param(_body(_span(name=None)), id="null name"),
        pytest.param(_body(_span(attributes=[])), id="list for attributes"),
        pytest.param(_body(_span(events=[{"name": "e"}])), id="event without time"),
        pytest.param(json.dumps({"spans": {}}).encode(), id="object for spans"),
    ],
)
def test_an_undecodable_body_raises_decode_error(body: bytes) -> None:
    with pytest.raises(DecodeError):
        decode_native_json(body)
