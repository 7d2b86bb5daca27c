"""What one span may hold: rejected past the hard limits, truncated where the SDK truncates."""

import gzip
from typing import Any

import pytest
from django.test import override_settings
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from apps.ingest.decoding import decode_native_json, decode_otlp_json, decode_otlp_protobuf
from apps.ingest.decoding.limits import (
    DROPPED_EVENTS,
    LONG_KEYS,
    TRUNCATED_ATTRIBUTES,
    SpanLimits,
    SpanReason,
    span_bound,
    spans_bounded,
)
from apps.ingest.decoding.records import Rejections, SpanEvent, SpanRecord
from apps.ingest.models import RawBatch
from tests.builders.spans import T0, encode, otlp_json, span
from tests.conftest import TeamWorld
from tests.ingest.endpoint_helpers import (
    PROTOBUF,
    batch_spans,
    export_response,
    ingest_token,
    native_batch,
    native_span,
    post,
)
from tests.timing import MS

OTLP = "/v1/traces"
MIB = 1024 * 1024

pytestmark = pytest.mark.usefixtures("clean_cache")


def _two_spans(**odd: Any) -> bytes:
    """A well-behaved root and one odd child, as an OTLP/protobuf request."""
    return encode([span(1, None, T0, T0 + 100 * MS, name="root"), span(2, 1, **odd)])


# --- The findings: a huge value, thousands of keys, a huge name ----------------------------


def test_a_26_mib_attribute_from_a_small_gzip_request_is_rejected_and_nothing_of_it_stored(
    world: TeamWorld,
) -> None:
    body = gzip.compress(_two_spans(name="child", attributes={"payload": "x" * (26 * MIB)}))
    assert len(body) < 200 * 1024  # it compresses to almost nothing

    response = post(
        OTLP, body, token=ingest_token(world.team), headers={"Content-Encoding": "gzip"}
    )

    assert response.status_code == 200
    partial = export_response(response).partial_success
    assert partial.rejected_spans == 1
    assert "span too large" in partial.error_message
    batch = RawBatch.objects.get()
    assert batch.span_count == 1  # the root alone
    assert len(bytes(batch.body)) < 10_000


def test_a_span_with_20000_keys_is_rejected_with_its_reason(world: TeamWorld) -> None:
    attributes = {f"key.{i}": i for i in range(20_000)}

    response = post(
        OTLP, _two_spans(name="child", attributes=attributes), token=ingest_token(world.team)
    )

    partial = export_response(response).partial_success
    assert partial.rejected_spans == 1
    assert "too many attributes" in partial.error_message
    assert RawBatch.objects.get().span_count == 1


def test_a_2_mib_name_is_rejected(world: TeamWorld) -> None:
    response = post(OTLP, _two_spans(name="n" * (2 * MIB)), token=ingest_token(world.team))

    partial = export_response(response).partial_success
    assert partial.rejected_spans == 1
    assert "name too long" in partial.error_message


def test_when_every_span_is_over_its_budget_nothing_is_stored(world: TeamWorld) -> None:
    body = encode([span(1, name="n" * 5000), span(2, name="m" * 5000)])

    response = post(OTLP, body, token=ingest_token(world.team))

    assert export_response(response).partial_success.rejected_spans == 2
    assert not RawBatch.objects.exists()


# --- Truncated or dropped, as the SDK does, and the span kept ------------------------------


def test_a_long_value_is_truncated_to_the_limit_and_noted(world: TeamWorld) -> None:
    prompt = "é" * 100_000
    body = _two_spans(name="llm", attributes={"gen_ai.prompt": prompt, "model": "m"})

    response = post(OTLP, body, token=ingest_token(world.team))

    partial = export_response(response).partial_success
    assert partial.rejected_spans == 0
    assert "truncated 1 attribute value" in partial.error_message
    stored = {row[1]: row for row in batch_spans(RawBatch.objects.get())}
    attributes = stored[(2).to_bytes(8, "big")][11]
    assert attributes["gen_ai.prompt"] == "é" * 16_384
    assert attributes["model"] == "m"
    assert attributes[TRUNCATED_ATTRIBUTES] == ["gen_ai.prompt"]


def test_strings_inside_arrays_are_truncated_too(settings) -> None:
    settings.INGEST_MAX_ATTRIBUTE_VALUE_LENGTH = 4
    body = _two_spans(name="tool", attributes={"docs": ["abcdefgh", "ab"], "n": [1, 2]})

    [_, child] = decode_otlp_protobuf(body).spans

    assert child.attributes["docs"] == ["abcd", "ab"]
    assert child.attributes["n"] == [1, 2]


def test_events_past_the_limit_are_dropped_keeping_the_first(world: TeamWorld) -> None:
    events = [("first_token", T0 + 1)] + [(f"chunk {i}", T0 + 2 + i) for i in range(499)]
    body = _two_spans(name="llm", events=events)

    response = post(OTLP, body, token=ingest_token(world.team))

    assert "dropped 372 events" in export_response(response).partial_success.error_message
    stored = {row[1]: row for row in batch_spans(RawBatch.objects.get())}
    child = stored[(2).to_bytes(8, "big")]
    assert len(child[12]) == 128
    assert child[12][0]["name"] == "first_token"
    assert child[11][DROPPED_EVENTS] == 372


def test_an_attribute_with_a_key_too_long_is_dropped_and_the_span_kept(world: TeamWorld) -> None:
    body = _two_spans(name="op", attributes={"k" * 300: "v", "ok": 1})

    response = post(OTLP, body, token=ingest_token(world.team))

    partial = export_response(response).partial_success
    assert partial.rejected_spans == 0
    assert "key too long (1)" in partial.error_message
    stored = {row[1]: row for row in batch_spans(RawBatch.objects.get())}
    attributes = stored[(2).to_bytes(8, "big")][11]
    assert "k" * 300 not in attributes
    assert attributes["ok"] == 1
    assert attributes[LONG_KEYS] == ["k" * 64 + "…"]


def test_event_attributes_are_held_to_the_same_limits(settings) -> None:
    settings.INGEST_MAX_ATTRIBUTE_VALUE_LENGTH = 3
    body = _two_spans(name="llm", events=[("first_token", T0 + 1, {"text": "hello"})])

    [_, child] = decode_otlp_protobuf(body).spans

    assert child.events[0].attributes == {"text": "hel"}


def test_the_json_decoders_hold_spans_to_the_same_budget() -> None:
    otlp = decode_otlp_json(otlp_json([span(1, name="ok"), span(2, name="x" * 5000)]))
    native = decode_native_json(
        native_batch(native_span("01" * 8, name="ok"), native_span("02" * 8, name="x" * 5000))
    )

    for result in (otlp, native):
        assert [s.name for s in result.spans] == ["ok"]
        assert result.reasons == {SpanReason.NAME_TOO_LONG: 1}


def test_a_status_message_counts_towards_the_span_size(settings) -> None:
    settings.INGEST_MAX_SPAN_SIZE = 1000
    body = _two_spans(name="op", status="error", message="e" * 2000)

    result = decode_otlp_protobuf(body)

    assert result.reasons == {SpanReason.TOO_LARGE: 1}


# --- The quick path never lets through what the full check would change ------------------

_values = st.one_of(
    st.text(max_size=40),
    st.integers(-(2**63), 2**63 - 1),
    st.booleans(),
    st.lists(st.text(max_size=12), max_size=4),
)


def _record(name: str, attributes: dict[str, Any], events: int) -> SpanRecord:
    return SpanRecord(
        trace_id=b"\x01" * 16, span_id=b"\x02" * 8, parent_span_id=None, name=name,
        service="svc", kind="internal", start_ns=T0, end_ns=T0 + MS, status="unset",
        status_message="", attributes=attributes, resource={}, scope_name="",
        events=[SpanEvent(f"e{i}", T0, {"k": "v" * i}) for i in range(events)],
    )  # fmt: skip


@hypothesis_settings(max_examples=300, deadline=None)
@given(
    name=st.text(min_size=1, max_size=12),
    attributes=st.dictionaries(st.text(max_size=12), _values, max_size=12),
    events=st.integers(0, 6),
    limits=st.tuples(
        st.integers(1, 12),
        st.integers(1, 12),
        st.integers(1, 12),
        st.integers(1, 40),
        st.integers(0, 6),
        st.integers(1, 400),
    ),
)
def test_the_quick_path_agrees_with_the_full_check(
    name: str, attributes: dict[str, Any], events: int, limits: tuple[int, ...]
) -> None:
    budget = SpanLimits(*limits)
    sent = _record(name, attributes, events)
    expected = span_bound(sent, budget)

    with override_settings(
        INGEST_MAX_SPAN_NAME_LENGTH=budget.name_length,
        INGEST_MAX_SPAN_ATTRIBUTES=budget.attributes,
        INGEST_MAX_ATTRIBUTE_KEY_LENGTH=budget.key_length,
        INGEST_MAX_ATTRIBUTE_VALUE_LENGTH=budget.value_length,
        INGEST_MAX_SPAN_EVENTS=budget.events,
        INGEST_MAX_SPAN_SIZE=budget.span_size,
    ):
        result = spans_bounded([sent], Rejections())

    if expected.span is None:
        assert result.spans == []
        assert result.reasons == {expected.reason: 1}
    else:
        assert result.spans == [expected.span]


def test_a_span_within_every_limit_is_passed_on_as_it_came() -> None:
    sent = _record("op", {"a": "b", "n": 1}, 1)

    assert spans_bounded([sent], Rejections()).spans[0] is sent


def test_the_limits_are_settings(settings) -> None:
    settings.INGEST_MAX_SPAN_ATTRIBUTES = 2

    result = decode_otlp_protobuf(_two_spans(name="op", attributes={"a": 1, "b": 2, "c": 3}))

    assert result.reasons == {SpanReason.TOO_MANY_ATTRIBUTES: 1}
    assert result.errors == ["span 0000000000000002: too many attributes (3 attributes, over 2)"]


def test_the_content_type_of_a_rejection_answer_is_protobuf(world: TeamWorld) -> None:
    response = post(OTLP, _two_spans(name="n" * 2000), token=ingest_token(world.team))

    assert response["Content-Type"] == PROTOBUF
