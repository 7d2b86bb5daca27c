"""Normalized span records: what every decoder produces, whatever the wire format.

Records are read-only by convention: spans of one resource share the same
``resource`` dict, and decoders never touch a record after building it.
"""

import math
from typing import Any, NamedTuple

import msgspec

from apps.ingest.decoding.numeric import (
    DROPPED_ATTRIBUTES,
    NUMERIC_KEYS,
    Drop,
    drop_notes,
    unusable_numbers_drop,
)

AttributeValue = str | int | float | bool | list[Any]
Attributes = dict[str, AttributeValue]

UNKNOWN_SERVICE = "unknown_service"
KINDS = ("unspecified", "internal", "server", "client", "producer", "consumer")
STATUSES = ("unset", "ok", "error")

# Span times end up in bigint columns.
MAX_TIME_NS = 2**63 - 1
MAX_ERRORS = 5

# Deprecated GenAI semantic-convention names and their replacements. The old key is
# kept so that rules written against either name keep matching.
GENAI_RENAMES = (
    ("gen_ai.system", "gen_ai.provider.name"),
    ("gen_ai.usage.prompt_tokens", "gen_ai.usage.input_tokens"),
    ("gen_ai.usage.completion_tokens", "gen_ai.usage.output_tokens"),
)


class SpanEvent(NamedTuple):
    name: str
    time_ns: int
    attributes: Attributes


# gc=False: nothing a record holds can refer back to it, and batches make many of them.
class SpanRecord(msgspec.Struct, frozen=True, gc=False):
    trace_id: bytes
    span_id: bytes
    parent_span_id: bytes | None
    name: str
    service: str
    kind: str
    start_ns: int
    end_ns: int
    status: str
    status_message: str
    attributes: Attributes
    resource: Attributes
    scope_name: str
    events: list[SpanEvent]


class Reason:
    """Why a single span was rejected; also the key of ``DecodeResult.reasons``."""

    TRACE_ID = "invalid trace id"
    SPAN_ID = "invalid span id"
    PARENT_ID = "invalid parent span id"
    NAME = "empty name"
    TIME = "missing or invalid time"
    END_BEFORE_START = "end before start"
    KIND = "invalid kind"
    STATUS = "invalid status"


class DecodeResult(msgspec.Struct):
    """``errors`` lists the first few rejections, then the first few dropped attributes."""

    spans: list[SpanRecord]
    rejected: int = 0
    errors: list[str] = []
    reasons: dict[str, int] = {}
    dropped: int = 0
    dropped_reasons: dict[str, int] = {}
    # Accepted spans cut to their budget (see ``limits``): string values truncated,
    # events dropped.
    truncated: int = 0
    dropped_events: int = 0

    def rejecting(self, kept: list[SpanRecord], more: "Rejections") -> "DecodeResult":
        """This result with ``more`` spans rejected after decoding, ``kept`` the rest."""
        first = min(self.rejected, MAX_ERRORS)  # errors list rejections before drops
        reasons = dict(self.reasons)
        for reason, count in more.reasons.items():
            reasons[reason] = reasons.get(reason, 0) + count
        errors = self.errors[:first] + more.errors[: MAX_ERRORS - first] + self.errors[first:]
        return msgspec.structs.replace(
            self, spans=kept, rejected=self.rejected + more.count, errors=errors, reasons=reasons
        )

    @property
    def error_message(self) -> str:
        """One line for ``partial_success.error_message``; empty when nothing was refused.

        A span that lost an attribute is accepted, so it counts among the dropped
        attributes, never among the rejected spans.
        """
        parts = []
        if self.rejected:
            noun = "span" if self.rejected == 1 else "spans"
            parts.append(f"rejected {self.rejected} {noun}: {_counts(self.reasons)}")
        if self.dropped:
            noun = "attribute" if self.dropped == 1 else "attributes"
            parts.append(f"dropped {self.dropped} {noun}: {_counts(self.dropped_reasons)}")
        if self.truncated:
            noun = "value" if self.truncated == 1 else "values"
            parts.append(f"truncated {self.truncated} attribute {noun} to their length limit")
        if self.dropped_events:
            noun = "event" if self.dropped_events == 1 else "events"
            parts.append(f"dropped {self.dropped_events} {noun} past the limit per span")
        return "; ".join(parts)


def _counts(reasons: dict[str, int]) -> str:
    return ", ".join(f"{reason} ({n})" for reason, n in reasons.items())


class Rejections:
    """Counts rejected spans and dropped attributes per reason, keeping the first few messages."""

    __slots__ = (
        "count", "dropped", "dropped_errors", "dropped_events", "dropped_reasons", "errors",
        "reasons", "truncated",
    )  # fmt: skip

    def __init__(self) -> None:
        self.count = 0
        self.truncated = 0
        self.dropped_events = 0
        self.errors: list[str] = []
        self.reasons: dict[str, int] = {}
        self.dropped = 0
        self.dropped_errors: list[str] = []
        self.dropped_reasons: dict[str, int] = {}

    def add(self, index: int, reason: str) -> None:
        self.count += 1
        self.reasons[reason] = self.reasons.get(reason, 0) + 1
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(f"span {index}: {reason}")

    def add_over_budget(self, span_id: bytes, reason: str, message: str) -> None:
        """A decoded span refused by its budget: named by its id, its index is gone by then."""
        self.count += 1
        self.reasons[reason] = self.reasons.get(reason, 0) + 1
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(f"span {span_id.hex()}: {message}")

    def drop(self, where: str, drops: list[Drop]) -> None:
        """Count attributes dropped from an accepted span ("span 3") or a resource."""
        self.dropped += len(drops)
        for drop in drops:
            summary = drop.summary
            self.dropped_reasons[summary] = self.dropped_reasons.get(summary, 0) + 1
            if len(self.dropped_errors) < MAX_ERRORS:
                self.dropped_errors.append(f"{where}: dropped {drop.note}")

    def result(self, spans: list[SpanRecord]) -> DecodeResult:
        return DecodeResult(
            spans=spans,
            rejected=self.count,
            errors=self.errors + self.dropped_errors,
            reasons=self.reasons,
            dropped=self.dropped,
            dropped_reasons=self.dropped_reasons,
            truncated=self.truncated,
            dropped_events=self.dropped_events,
        )


_ZERO_TRACE_ID = bytes(16)
_ZERO_SPAN_ID = bytes(8)


def span_problem(
    trace_id: bytes, span_id: bytes, parent_span_id: bytes, name: str, start_ns: int, end_ns: int
) -> str | None:
    """The reason to reject a span, or None. An empty or all-zero parent means a root span."""
    if len(trace_id) != 16 or trace_id == _ZERO_TRACE_ID:
        return Reason.TRACE_ID
    if len(span_id) != 8 or span_id == _ZERO_SPAN_ID:
        return Reason.SPAN_ID
    if parent_span_id and len(parent_span_id) != 8:
        return Reason.PARENT_ID
    if not name:
        return Reason.NAME
    if start_ns <= 0 or end_ns <= 0 or start_ns > MAX_TIME_NS or end_ns > MAX_TIME_NS:
        return Reason.TIME
    if end_ns < start_ns:
        return Reason.END_BEFORE_START
    return None


def parent_or_none(parent_span_id: bytes) -> bytes | None:
    if not parent_span_id or parent_span_id == _ZERO_SPAN_ID:
        return None
    return parent_span_id


def attributes_settle(attributes: Attributes, drops: list[Drop]) -> None:
    """Drop unusable numbers, copy deprecated GenAI names, note any drop on the span.

    Checked before the copy, so a bad deprecated value is not copied and a good one
    stands in for a bad current one. ``drops`` may already hold drops made while
    decoding the span's values. One call per span, hence the loops inline.
    """
    if not NUMERIC_KEYS.isdisjoint(attributes):
        unusable_numbers_drop(attributes, drops)
    for old, new in GENAI_RENAMES:
        if old in attributes and new not in attributes:
            attributes[new] = attributes[old]
    if drops:
        attributes[DROPPED_ATTRIBUTES] = drop_notes(drops)


def service_of(resource: Attributes) -> str:
    service = resource.get("service.name")
    if service is None or service == "":
        return UNKNOWN_SERVICE
    return service if isinstance(service, str) else str(service)


def finite_or_text(number: float) -> float | str:
    """NaN and infinities have no JSON form; keep them as their proto3 JSON strings."""
    if math.isfinite(number):
        return number
    if math.isnan(number):
        return "NaN"
    return "Infinity" if number > 0 else "-Infinity"
