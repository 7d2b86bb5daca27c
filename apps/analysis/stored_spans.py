"""Stored spans back to the span shape trace analysis works on."""

from collections import defaultdict
from typing import Any

import msgspec
from django.db import connection

from apps.analysis.spans import Span
from apps.core.sql_arrays import array_literal
from apps.ingest.decoding.records import KINDS
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
    )


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
    sql = f"SELECT {columns} FROM ingest_span WHERE trace_pk = ANY(%s::bigint[])"  # noqa: S608
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
