"""Stored spans back to the span shape trace analysis works on."""

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import msgspec
from django.db import connection

from apps.analysis.degradations import DECISION_EVENT, SpanDecision, span_decision
from apps.analysis.span_projection import PROJECTED_FIELDS, READ_BYTES_SQL, SpanProjection
from apps.analysis.spans import Span
from apps.core.sql_arrays import array_literal
from apps.ingest.decoding.records import KINDS
from apps.ingest.models import Span as StoredSpan
from apps.ingest.models import StatusCode, Trace

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


SPAN_FIELDS = (
    "trace_pk", "span_id", "parent_span_id", "name", "service", "kind", "start_ns", "end_ns",
    "attributes", "events", "status",
)  # fmt: skip


def _start_bounds(traces: list[Trace]) -> tuple[int, int] | None:
    """The span starts of all the traces, when every trace knows its own (older rows may not)."""
    firsts = [t.first_span_start_ns for t in traces]
    lasts = [t.last_span_start_ns for t in traces]
    if not traces or any(v is None for v in firsts + lasts):
        return None
    return min(v for v in firsts if v is not None), max(v for v in lasts if v is not None)


def spans_of_traces(traces: list[Trace]) -> dict[int, list[Span]]:
    """The stored spans of the traces, as analysis spans, per trace row id."""
    trace_pks = [t.pk for t in traces]
    spans: dict[int, list[Span]] = defaultdict(list)
    # JSON columns come back as text and are decoded with msgspec, several times
    # faster than the ORM's json.loads per value; most spans have no events. The start
    # bounds (inlined as constants) let PostgreSQL skip the day partitions that cannot
    # hold these spans instead of probing every day's index for every trace.
    columns = ", ".join(f"{f}::text" if f in ("attributes", "events") else f for f in SPAN_FIELDS)
    sql = f"SELECT {columns} FROM {_SPANS} WHERE trace_pk = ANY(%s::bigint[])"  # noqa: S608
    params: list[int | str] = [array_literal(trace_pks)]
    bounds = _start_bounds(traces)
    if bounds is not None:
        sql += " AND start_ns BETWEEN %s AND %s"
        params += bounds
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    decode = msgspec.json.decode
    for pk, span_id, parent, name, service, kind, start, end, attributes, events, status in rows:
        fields = (span_id, parent, name, service, kind, start, end, decode(attributes))
        events = decode(events) if events != "[]" else None
        spans[pk].append(analysis_span(*fields, events, status))
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


# Each trace's spans projected once; then a running sum, trace after trace in the order
# given (the window's peers are a trace's spans, so a trace is read whole or not at
# all), keeps the traces that fit. The first trace that does not is named by one more
# row without a span id.
_SPANS = StoredSpan._meta.db_table
_READ = """
    WITH spans AS MATERIALIZED (
        SELECT s.trace_pk, {columns} FROM {table} AS s
        WHERE s.trace_pk = ANY(%(traces)s::bigint[]) {bounds}
    ), running AS (
        SELECT spans.*, sum({size}) OVER (ORDER BY o.n) AS read_bytes
        FROM spans JOIN unnest(%(traces)s::bigint[]) WITH ORDINALITY AS o(pk, n)
            ON o.pk = spans.trace_pk
    )
    SELECT trace_pk, {fields}, read_bytes FROM running WHERE read_bytes <= %(budget)s
    UNION ALL (
        SELECT trace_pk, {nulls}, read_bytes FROM running WHERE read_bytes > %(budget)s
        ORDER BY read_bytes LIMIT 1
    )
"""


def spans_read(traces: list[Trace], *, projection: SpanProjection, max_bytes: int) -> SpansRead:
    """The spans of ``traces`` as ``projection`` shapes them, whole traces in the order
    given, until the next trace would take what is read past ``max_bytes``.

    What is read is counted in bytes of the projected texts plus a fixed weight per span
    (``READ_BYTES_SQL``): the memory a reader holds, whatever the spans store.
    """
    read = SpansRead()
    if not traces:
        return read
    params: dict[str, Any] = {
        **projection.params,
        "traces": array_literal([t.pk for t in traces]),
        "budget": max_bytes,
    }
    bounds = _start_bounds(traces)
    if bounds is not None:
        params["first"], params["last"] = bounds
    sql = _READ.format(
        columns=projection.columns_sql,
        table=_SPANS,
        bounds="AND s.start_ns BETWEEN %(first)s AND %(last)s" if bounds is not None else "",
        size=READ_BYTES_SQL,
        fields=", ".join(PROJECTED_FIELDS),
        nulls=", ".join(["NULL"] * len(PROJECTED_FIELDS)),
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    decode = msgspec.json.decode
    spans = read.spans
    for row in rows:
        pk, span_id, parent, name, service, kind, start, end, attributes, events, status = row[:11]
        message, read_bytes = row[11:]
        if span_id is None:
            read.left_out_from = pk
            continue
        read.bytes_read = max(read.bytes_read, read_bytes)
        fields = (span_id, parent, name, service, kind, start, end, decode(attributes))
        span = analysis_span(*fields, decode(events) if events != "[]" else None, status)
        spans.append(ReadSpan(pk, span, status, message))
    return read
