"""Per-span budgets: what one span may hold, whatever its request's size.

A small compressed request can decode into one enormous span (a name of megabytes,
a value of tens of megabytes, tens of thousands of keys). The request caps bound
the request, not its spans; these bound each span, so that everything downstream
(the drain, analysis, the trace page) handles spans of a known size.

Two kinds of answer, as the OpenTelemetry SDK has them:
- truncated or dropped, and the span kept: a string value longer than the value
  limit is cut to it (the SDK's ``OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT``), events past
  the event limit are dropped (``OTEL_SPAN_EVENT_COUNT_LIMIT``), and an attribute
  whose key is too long is dropped; each is noted on the span.
- rejected, reported in ``partial_success`` with its reason: a name too long, more
  attributes than the limit, or a span larger as sent than the span limit. The SDK
  never produces those (it caps attributes at 128), so they are not worth guessing
  which part to keep: keeping an arbitrary subset of attributes could drop the one
  a stage rule matches on, and attribute time to the wrong stage without a word.

Lengths are counted in characters (a character is at most 4 bytes in UTF-8).
"""

from dataclasses import dataclass
from typing import Any

import msgspec
from django.conf import settings

from apps.ingest.decoding.records import (
    Attributes,
    DecodeResult,
    Rejections,
    SpanEvent,
    SpanRecord,
)

TRUNCATED_ATTRIBUTES = "latency_budgets.truncated_attributes"
DROPPED_EVENTS = "latency_budgets.dropped_events"
LONG_KEYS = "latency_budgets.dropped_long_keys"
# Notes on a span name at most this many keys, then a tally.
MAX_NOTED_KEYS = 10
# A number or a boolean, as sent, is about this big (protobuf: a tag and up to 9 bytes).
_SCALAR_SIZE = 8


class SpanReason:
    """Why a span was rejected by its budget; also the key of ``DecodeResult.reasons``."""

    NAME_TOO_LONG = "name too long"
    TOO_MANY_ATTRIBUTES = "too many attributes"
    TOO_LARGE = "span too large"
    # The span's trace has no room left (apps/ingest/services/trace_limits.py).
    TRACE_SPANS = "trace at its span limit"
    TRACE_BYTES = "trace at its byte limit"


@dataclass(frozen=True, slots=True)
class SpanLimits:
    name_length: int
    attributes: int
    key_length: int
    value_length: int
    events: int
    span_size: int

    @classmethod
    def from_settings(cls) -> "SpanLimits":
        return cls(
            name_length=settings.INGEST_MAX_SPAN_NAME_LENGTH,
            attributes=settings.INGEST_MAX_SPAN_ATTRIBUTES,
            key_length=settings.INGEST_MAX_ATTRIBUTE_KEY_LENGTH,
            value_length=settings.INGEST_MAX_ATTRIBUTE_VALUE_LENGTH,
            events=settings.INGEST_MAX_SPAN_EVENTS,
            span_size=settings.INGEST_MAX_SPAN_SIZE,
        )


@dataclass(slots=True)
class Verdict:
    """What the budget made of one span: rejected (with a message), or kept as ``span``."""

    span: SpanRecord | None
    reason: str = ""
    message: str = ""
    truncated: int = 0
    dropped_events: int = 0
    dropped_keys: int = 0


LONG_KEY_REASON = "key too long"


def spans_bounded(spans: list[SpanRecord], rejections: Rejections) -> DecodeResult:
    """A decoder's result with every span held to its budget; the last step of each decoder."""
    limits = SpanLimits.from_settings()
    # The JSON form's length bounds every key and value in it: a span whose attributes
    # encode shorter than the value limit, with short keys and few small events, has
    # nothing to check further. Encoding runs in C, several times faster than a walk.
    quick = min(limits.value_length, limits.span_size // 4)
    # Events as JSON this short hold no key over the key limit either.
    quick_events = min(quick, limits.key_length)
    event_count = limits.events
    encode = msgspec.json.encode
    key_length = limits.key_length
    name_length = limits.name_length
    kept: list[SpanRecord] = []
    for span in spans:
        attributes = span.attributes
        events = span.events
        if (
            len(span.name) <= name_length
            and len(attributes) <= limits.attributes
            and len(encode(attributes)) <= quick
            and (not attributes or max(map(len, attributes)) <= key_length)
            and len(span.status_message) <= quick
            and (not events or (len(events) <= event_count and len(encode(events)) <= quick_events))
        ):
            kept.append(span)
            continue
        verdict = span_bound(span, limits)
        if verdict.span is None:
            rejections.add_over_budget(span.span_id, verdict.reason, verdict.message)
            continue
        kept.append(verdict.span)
        if verdict.span is not span:
            rejections.truncated += verdict.truncated
            rejections.dropped_events += verdict.dropped_events
            if verdict.dropped_keys:
                rejections.dropped += verdict.dropped_keys
                reasons = rejections.dropped_reasons
                reasons[LONG_KEY_REASON] = reasons.get(LONG_KEY_REASON, 0) + verdict.dropped_keys
    return rejections.result(kept)


def span_bound(span: SpanRecord, limits: SpanLimits) -> Verdict:
    """The span within its budget, or why it cannot be kept.

    The common span (short name, a handful of short attributes, few events) costs
    one pass over its attributes and is returned as it came.
    """
    name_length = len(span.name)
    if name_length > limits.name_length:
        return _rejected(
            SpanReason.NAME_TOO_LONG,
            f"name of {name_length} characters, over {limits.name_length}",
        )
    attributes = span.attributes
    if len(attributes) > limits.attributes:
        return _rejected(
            SpanReason.TOO_MANY_ATTRIBUTES,
            f"{len(attributes)} attributes, over {limits.attributes}",
        )
    size, long_keys, long_values = _attributes_size(attributes, limits)
    size += name_length + len(span.status_message)
    events = span.events
    event_long_values = False
    for event in events:
        event_size, event_keys, event_values = _attributes_size(event.attributes, limits)
        size += len(event.name) + _SCALAR_SIZE + event_size
        event_long_values = event_long_values or bool(event_keys or event_values)
    if size > limits.span_size:
        return _rejected(
            SpanReason.TOO_LARGE,
            f"{size} characters of name, attributes and events, over {limits.span_size}",
        )
    if not (long_keys or long_values or event_long_values or len(events) > limits.events):
        return Verdict(span)
    return _trimmed(span, limits, long_keys, long_values)


def _rejected(reason: str, detail: str) -> Verdict:
    return Verdict(None, reason=reason, message=f"{reason} ({detail})")


def _attributes_size(
    attributes: Attributes, limits: SpanLimits
) -> tuple[int, list[str], list[str]]:
    """Characters as sent, and the keys too long and the keys whose value is too long."""
    size = 0
    long_keys: list[str] = []
    long_values: list[str] = []
    key_limit = limits.key_length
    value_limit = limits.value_length
    for key, value in attributes.items():
        key_length = len(key)
        if key_length > key_limit:
            long_keys.append(key)
        kind = type(value)
        if kind is str:
            length = len(value)  # type: ignore[arg-type]  # a str, by the check above
            size += key_length + length
            if length > value_limit:
                long_values.append(key)
        elif kind is list or kind is dict:
            length, too_long = _container_size(value, value_limit)
            size += key_length + length
            if too_long:
                long_values.append(key)
        else:
            size += key_length + _SCALAR_SIZE
    return size, long_keys, long_values


def _container_size(value: Any, value_limit: int) -> tuple[int, bool]:
    """An array's (or kvlist's) size as sent, and whether a string in it is over the limit."""
    size = 0
    too_long = False
    items = value.items() if isinstance(value, dict) else ((None, item) for item in value)
    for key, item in items:
        if key is not None:
            size += len(key)
        if isinstance(item, str):
            size += len(item)
            too_long = too_long or len(item) > value_limit
        elif isinstance(item, list | dict):
            inner, inner_long = _container_size(item, value_limit)
            size += inner
            too_long = too_long or inner_long
        else:
            size += _SCALAR_SIZE
    return size, too_long


def _trimmed(
    span: SpanRecord, limits: SpanLimits, long_keys: list[str], long_values: list[str]
) -> Verdict:
    """The span with long keys dropped, long values cut and extra events dropped, noted."""
    attributes = dict(span.attributes)
    for key in long_keys:
        del attributes[key]
    kept_values = [key for key in long_values if key in attributes]
    for key in kept_values:
        attributes[key] = _truncate(attributes[key], limits.value_length)
    truncated = len(kept_values)
    dropped_keys = len(long_keys)
    events: list[SpanEvent] = []
    for event in span.events[: limits.events]:
        event_attributes, event_truncated, event_dropped = _event_attributes(event, limits)
        truncated += event_truncated
        dropped_keys += event_dropped
        if event_attributes is not None:
            event = event._replace(attributes=event_attributes)
        events.append(event)
    dropped_events = max(0, len(span.events) - limits.events)
    if kept_values:
        attributes[TRUNCATED_ATTRIBUTES] = _noted(kept_values)
    if long_keys:
        attributes[LONG_KEYS] = _noted([key[:64] + "…" for key in long_keys])
    if dropped_events:
        attributes[DROPPED_EVENTS] = dropped_events
    trimmed = msgspec.structs.replace(span, attributes=attributes, events=events)
    return Verdict(
        trimmed, truncated=truncated, dropped_events=dropped_events, dropped_keys=dropped_keys
    )


def _event_attributes(event: SpanEvent, limits: SpanLimits) -> tuple[Attributes | None, int, int]:
    """An event's attributes within the limits (None when they already are), and the tallies."""
    _, long_keys, long_values = _attributes_size(event.attributes, limits)
    if not (long_keys or long_values):
        return None, 0, 0
    attributes = {k: v for k, v in event.attributes.items() if k not in long_keys}
    kept = [key for key in long_values if key in attributes]
    for key in kept:
        attributes[key] = _truncate(attributes[key], limits.value_length)
    return attributes, len(kept), len(long_keys)


def _truncate(value: Any, limit: int) -> Any:
    """Strings cut to ``limit`` characters, inside arrays too, as the SDK does."""
    if isinstance(value, str):
        return value[:limit]
    if isinstance(value, list):
        return [_truncate(item, limit) for item in value]
    if isinstance(value, dict):
        return {key: _truncate(item, limit) for key, item in value.items()}
    return value


def _noted(keys: list[str]) -> list[str]:
    noted = keys[:MAX_NOTED_KEYS]
    if len(keys) > MAX_NOTED_KEYS:
        noted.append(f"and {len(keys) - MAX_NOTED_KEYS} more")
    return noted
