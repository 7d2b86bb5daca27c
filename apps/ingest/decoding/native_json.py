"""Our native JSON span format (documented in docs/ingestion.md) to span records.

Wrong JSON types and missing required fields reject the whole body; bad ids,
empty names, unreadable or out-of-range times, unknown kinds or statuses reject
only the span concerned; an integer beyond 64 bits, or a number analysis cannot
use, drops only that attribute.
"""

from typing import Any

import msgspec
from django.conf import settings

from apps.ingest.decoding.errors import DecodeError
from apps.ingest.decoding.json_depth import json_depth_check
from apps.ingest.decoding.limits import spans_bounded
from apps.ingest.decoding.numeric import INT64_MAX, INT64_MIN, Drop, Problem, holds_big_integer
from apps.ingest.decoding.records import (
    KINDS,
    STATUSES,
    UNKNOWN_SERVICE,
    Attributes,
    DecodeResult,
    Reason,
    Rejections,
    SpanEvent,
    SpanRecord,
    attributes_settle,
    parent_or_none,
    service_of,
    span_problem,
)
from apps.ingest.decoding.times import parse_rfc3339_ns

Time = int | str

# gc=False: decoded JSON holds no reference cycles, so the cycle collector can skip these.


class NativeEvent(msgspec.Struct, gc=False):
    name: str
    time: Time
    attributes: dict[str, Any] = {}


class NativeSpan(msgspec.Struct, gc=False):
    trace_id: str
    span_id: str
    name: str
    start: Time
    end: Time
    parent_id: str | None = None
    service: str | None = None
    kind: str = "internal"
    attributes: dict[str, Any] = {}
    events: list[NativeEvent] = []
    status: str = "unset"
    status_message: str = ""


class NativeBatch(msgspec.Struct, gc=False):
    spans: list[NativeSpan]
    resource: dict[str, Any] = {}


_decoder = msgspec.json.Decoder(NativeBatch)
_KINDS = frozenset(KINDS)
_STATUSES = frozenset(STATUSES)


def decode_native_json(body: bytes) -> DecodeResult:
    json_depth_check(body)
    try:
        batch = _decoder.decode(body)
    except msgspec.ValidationError as exc:
        raise DecodeError(f"invalid span batch: {exc}") from exc
    except msgspec.DecodeError as exc:
        raise DecodeError(f"malformed JSON: {exc}") from exc

    rejections = Rejections()
    drops: list[Drop] = []
    resource = flat_attributes(batch.resource, drops)
    if drops:
        rejections.drop("resource", drops)
    default_service = service_of(resource)
    spans: list[SpanRecord] = []
    for index, span in enumerate(batch.spans):
        drops = []
        record = _record(span, resource, default_service, drops)
        if isinstance(record, str):
            rejections.add(index, record)
        else:
            spans.append(record)
            if drops:
                rejections.drop(f"span {index}", drops)
    return spans_bounded(spans, rejections)


def _record(
    span: NativeSpan, resource: Attributes, default_service: str, drops: list[Drop]
) -> SpanRecord | str:
    trace_id = _id(span.trace_id, 16)
    span_id = _id(span.span_id, 8)
    parent_span_id = _id(span.parent_id, 8) if span.parent_id else b""
    start_ns = _time(span.start)
    end_ns = _time(span.end)
    problem = span_problem(trace_id, span_id, parent_span_id, span.name, start_ns, end_ns)
    if problem is not None:
        return problem
    kind = span.kind.lower()
    if kind not in _KINDS:
        return Reason.KIND
    status = span.status.lower()
    if status not in _STATUSES:
        return Reason.STATUS
    events = []
    for event in span.events:
        time_ns = _time(event.time)
        if time_ns <= 0:
            return Reason.TIME
        seen = len(drops)
        event_attributes = flat_attributes(event.attributes, drops)
        if len(drops) > seen:
            drops[seen:] = [d._replace(key=f"{d.key} in event {event.name}") for d in drops[seen:]]
        events.append(SpanEvent(event.name, time_ns, event_attributes))
    attributes = flat_attributes(span.attributes, drops)
    attributes_settle(attributes, drops)
    return SpanRecord(
        trace_id,
        span_id,
        parent_or_none(parent_span_id),
        span.name,
        span.service or default_service or UNKNOWN_SERVICE,
        kind,
        start_ns,
        end_ns,
        status,
        span.status_message,
        attributes,
        resource,
        "",
        events,
    )


def _id(text: str, size: int) -> bytes:
    if len(text) != 2 * size:
        return b"?"
    try:
        return bytes.fromhex(text)
    except ValueError:
        return b"?"


def _time(value: Time) -> int:
    """Unix nanoseconds; 0 (rejected later as a missing time) when unreadable."""
    if isinstance(value, int):
        return value
    return parse_rfc3339_ns(value) or 0


def flat_attributes(values: dict[str, Any], drops: list[Drop], prefix: str = "") -> Attributes:
    """Nested objects become dotted keys; nulls are dropped, and so are values holding
    an integer beyond 64 bits (added to ``drops``). An object under a key already over
    the key length limit stays whole, as in otlp_attributes."""
    out: Attributes = {}
    key_limit = settings.INGEST_MAX_ATTRIBUTE_KEY_LENGTH
    for key, value in values.items():
        if value is None:
            continue
        kind = type(value)
        if kind is dict and len(prefix) + len(key) <= key_limit:
            out.update(flat_attributes(value, drops, f"{prefix}{key}."))
        elif (kind is int and not INT64_MIN <= value <= INT64_MAX) or (
            (kind is list or kind is dict) and holds_big_integer(value)
        ):
            drops.append(Drop(prefix + key, Problem.BIG_INTEGER, value))
        else:
            out[prefix + key] = value
    return out
