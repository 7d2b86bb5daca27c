"""Stored spans back to the span shape trace analysis works on, read through the span store."""

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import msgspec

from apps.analysis.degradations import DECISION_EVENT, SpanDecision, span_decision
from apps.analysis.spans import Span
from apps.ingest.decoding.records import KINDS
from apps.ingest.models import StatusCode, Trace
from apps.ingest.span_store import span_store
from apps.ingest.span_store.projection import SpanProjection

_KIND_COUNT = len(KINDS)
_ERROR = int(StatusCode.ERROR)


def analysis_span(
    span_id: bytes,
    parent_id: bytes | None,
    name: str,
    service: str,
    kind: int,
    start_ns: int,
    end_ns: int,
    attributes: dict[str, Any] | None,
    events: list[dict[str, Any]] | None,
    status: int,
) -> Span:
    # Positional and without copies (bytes and memoryview both have hex()): finalizing
    # builds one of these per stored span.
    return Span(
        span_id.hex(),
        parent_id.hex() if parent_id is not None else None,
        name,
        service,
        KINDS[kind] if 0 <= kind < _KIND_COUNT else "unspecified",
        start_ns,
        end_ns,
        attributes or {},
        tuple([(e["name"], e["time_ns"]) for e in events]) if events else (),
        status == _ERROR,
        _decisions(events) if events else (),
    )


def _decisions(events: list[dict[str, Any]]) -> tuple[SpanDecision, ...]:
    found = []
    for event in events:
        if event.get("name") == DECISION_EVENT:
            decision = span_decision(event)
            if decision is not None:
                found.append(decision)
    return tuple(found)


def spans_of_traces(traces: Sequence[Trace]) -> dict[int, list[Span]]:
    """The stored spans of the traces, as analysis spans, per trace row id."""
    spans: dict[int, list[Span]] = defaultdict(list)
    decode = msgspec.json.decode
    for row in span_store().spans_of_traces(traces):
        pk, span_id, parent, name, service, kind, start, end, attributes, events, status = row
        fields = (span_id, parent, name, service, kind, start, end, decode(attributes))
        spans[pk].append(analysis_span(*fields, decode(events) if events != "[]" else None, status))
    return spans


class ReadSpan(NamedTuple):
    trace_pk: int
    span: Span
    status: int
    status_message: str


@dataclass
class SpansRead:
    """Spans of whole traces, in the order the traces were given, within a byte budget."""

    spans: list[ReadSpan] = field(default_factory=list)
    bytes_read: int = 0
    # The first trace left out because its spans would take the read past its budget;
    # it and every trace after it were not read.
    left_out_from: int | None = None

    def by_trace(self) -> dict[int, list[Span]]:
        spans: dict[int, list[Span]] = defaultdict(list)
        for read in self.spans:
            spans[read.trace_pk].append(read.span)
        return spans


def spans_read(traces: Sequence[Trace], *, projection: SpanProjection, max_bytes: int) -> SpansRead:
    """The spans of ``traces`` as ``projection`` shapes them, whole traces in the order
    given, until the next trace would take what is read past ``max_bytes``.

    What is read is counted in bytes of the projected texts plus a fixed weight per span
    (``SPAN_OBJECT_BYTES``): the memory a reader holds, whatever the spans store.
    """
    read = SpansRead()
    if not traces:
        return read
    projected = span_store().spans_projected(traces, projection, max_bytes)
    read.bytes_read = projected.bytes_read
    read.left_out_from = projected.left_out_from
    decode = msgspec.json.decode
    spans = read.spans
    for row in projected.rows:
        pk, span_id, parent, name, service, kind, start, end, attributes, events, status = row[:11]
        fields = (span_id, parent, name, service, kind, start, end, decode(attributes))
        span = analysis_span(*fields, decode(events) if events != "[]" else None, status)
        spans.append(ReadSpan(pk, span, status, row[11]))
    return read
