"""Spans in PostgreSQL: the partitioned ``Span`` table, one partition a day of span start.

The default store, and the one the embedded database runs. The drain copies the raw
batches' rows in and leaves the rest to SQL (``span_writer``); reads are bounded to the
day partitions that can hold a trace's spans (its first and last span start), and a
projected read shapes attributes and events in SQL, so what a reader does not need never
leaves the database.
"""

from collections.abc import Sequence
from datetime import date
from typing import Any

from django.db import connection

from apps.core.partitions import partitions_drop_before, partitions_ensure
from apps.core.sql_arrays import array_literal
from apps.ingest.models import Span, Trace
from apps.ingest.services.span_writer import span_rows_store
from apps.ingest.span_store.base import (
    ContentRow,
    ProjectedRead,
    SpanStore,
    StoredRow,
    WriteResult,
)
from apps.ingest.span_store.projection import (
    NAME_CHARS,
    NUMBER_CHARS,
    PROJECTED_FIELDS,
    SERVICE_CHARS,
    SHOWN_VALUE_CHARS,
    SPAN_OBJECT_BYTES,
    STATUS_MESSAGE_CHARS,
    SpanProjection,
)

_SPANS = Span._meta.db_table
STORED_FIELDS = (
    "trace_pk", "span_id", "parent_span_id", "name", "service", "kind", "start_ns", "end_ns",
    "attributes", "events", "status",
)  # fmt: skip

# The attributes a projection reads, as one jsonb object per span. The span's attributes
# are walked once (each ``->`` would decompress a large value again); ``wanted`` maps a
# key to the texts its string values are compared with.
_ATTRIBUTES_SQL = f"""COALESCE((
    SELECT jsonb_object_agg(a.key, a.value)
    FROM jsonb_each(s.attributes) AS a
    JOIN jsonb_each(%(wanted)s::jsonb) AS w(key, texts) ON w.key = a.key
    WHERE CASE jsonb_typeof(a.value)
        WHEN 'string' THEN w.texts ? (a.value #>> '{{}}')
            OR a.key = ANY(%(seconds_keys)s::text[])
            OR (a.key = ANY(%(shown)s::text[])
                AND length(a.value #>> '{{}}') <= {SHOWN_VALUE_CHARS})
        WHEN 'number' THEN length(a.value::text) <= {NUMBER_CHARS}
        WHEN 'boolean' THEN true
        ELSE false
    END
), '{{}}'::jsonb)::text"""  # noqa: S608 - built from our own constants, no value
_EVENTS_SQL = """COALESCE((
    SELECT jsonb_agg(jsonb_build_object('name', e.event -> 'name', 'time_ns', e.event -> 'time_ns'))
    FROM jsonb_array_elements(s.events) AS e(event)
    WHERE e.event ->> 'name' = ANY(%(event_names)s::text[])
), '[]'::jsonb)::text"""
# The select list of a projected span ``s``, in ``PROJECTED_FIELDS`` order.
_PROJECTED_COLUMNS = (
    f"s.span_id, s.parent_span_id, left(s.name, {NAME_CHARS}) AS name, "
    f"left(s.service, {SERVICE_CHARS}) AS service, s.kind, s.start_ns, s.end_ns, "
    f"{_ATTRIBUTES_SQL} AS attributes, {_EVENTS_SQL} AS events, s.status, "
    f"left(s.status_message, {STATUS_MESSAGE_CHARS}) AS status_message"
)
# What a read weighs per span: the projected texts, and its objects.
READ_BYTES_SQL = (
    f"{SPAN_OBJECT_BYTES} + octet_length(name) + octet_length(service) "
    "+ octet_length(attributes) + octet_length(events) + octet_length(status_message)"
)
# Each trace's spans projected once; then a running sum, trace after trace in the order
# given (the window's peers are a trace's spans, so a trace is read whole or not at
# all), keeps the traces that fit. The first trace that does not is named by one more
# row without a span id.
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

# The copy kept when a span was stored twice is the one analysis keeps: ending last,
# then starting first (``unique_spans``).
_SPAN_START = f"""
    SELECT start_ns FROM "{_SPANS}"
    WHERE trace_pk = %(trace)s AND span_id = %(span)s {{bounds}}
    ORDER BY GREATEST(start_ns, end_ns) DESC, start_ns LIMIT 1
"""  # noqa: S608 - the table's name from the model
# Entry 0 holds the span's attributes; entry n its n-th event, with its name and time,
# one row an attribute (or one row for an event without any). The texts are cut before
# they leave the database; ``count(*) OVER ()`` counts the rows the LIMIT leaves out.
_ENTRIES = """
    WITH span AS MATERIALIZED (
        SELECT attributes, events FROM "{table}"
        WHERE trace_pk = %(trace)s AND span_id = %(span)s AND start_ns = %(start)s
    ), entries AS (
        SELECT 0 AS entry, NULL::jsonb AS head, a.key, a.value
        FROM span, jsonb_each(
            CASE jsonb_typeof(span.attributes) WHEN 'object' THEN span.attributes END
        ) AS a
        UNION ALL
        SELECT e.n, jsonb_build_array(left(e.event ->> 'name', %(chars)s), e.event -> 'time_ns'),
            ea.key, ea.value
        FROM span
        CROSS JOIN LATERAL jsonb_array_elements(
            CASE jsonb_typeof(span.events) WHEN 'array' THEN span.events ELSE '[]' END
        ) WITH ORDINALITY AS e(event, n)
        LEFT JOIN LATERAL jsonb_each(
            CASE jsonb_typeof(e.event -> 'attributes')
                WHEN 'object' THEN e.event -> 'attributes' ELSE '{}' END
        ) AS ea ON true
    ), texts AS (
        SELECT entry, head, key, value,
            CASE jsonb_typeof(value) WHEN 'string' THEN value #>> '{}' ELSE value::text END
                AS text
        FROM entries
    )
    SELECT entry, head::text, left(key, %(chars)s),
        CASE WHEN length(text) <= %(chars)s THEN value
            ELSE to_jsonb(left(text, %(chars)s)) END::text,
        length(text), count(*) OVER ()
    FROM texts ORDER BY entry, key LIMIT %(limit)s
""".replace("{table}", _SPANS)


def start_bounds(traces: Sequence[Trace]) -> tuple[int, int] | None:
    """The span starts of all the traces, when every trace knows its own (older rows may not)."""
    firsts = [t.first_span_start_ns for t in traces]
    lasts = [t.last_span_start_ns for t in traces]
    if not traces or any(v is None for v in firsts + lasts):
        return None
    return min(v for v in firsts if v is not None), max(v for v in lasts if v is not None)


class PostgresSpanStore(SpanStore):
    name = "postgresql"

    def spans_write(self, batches: list[tuple[int, bytes]]) -> WriteResult:
        return span_rows_store([payload for _, payload in batches])

    def spans_of_traces(self, traces: Sequence[Trace]) -> list[StoredRow]:
        # JSON columns come back as text, for the reader to decode with msgspec (several
        # times faster than the ORM's json.loads per value). The start bounds (inlined
        # as constants) let PostgreSQL skip the day partitions that cannot hold these
        # spans instead of probing every day's index for every trace.
        columns = ", ".join(
            f"{f}::text" if f in ("attributes", "events") else f for f in STORED_FIELDS
        )
        sql = f"SELECT {columns} FROM {_SPANS} WHERE trace_pk = ANY(%s::bigint[])"  # noqa: S608
        params: list[int | str] = [array_literal([t.pk for t in traces])]
        bounds = start_bounds(traces)
        if bounds is not None:
            sql += " AND start_ns BETWEEN %s AND %s"
            params += bounds
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return [StoredRow(*row) for row in cursor.fetchall()]

    def spans_projected(
        self, traces: Sequence[Trace], projection: SpanProjection, max_bytes: int
    ) -> ProjectedRead:
        read = ProjectedRead()
        if not traces:
            return read
        params: dict[str, Any] = {
            **projection.params,
            "traces": array_literal([t.pk for t in traces]),
            "budget": max_bytes,
        }
        bounds = start_bounds(traces)
        if bounds is not None:
            params["first"], params["last"] = bounds
        sql = _READ.format(
            columns=_PROJECTED_COLUMNS,
            table=_SPANS,
            bounds="AND s.start_ns BETWEEN %(first)s AND %(last)s" if bounds is not None else "",
            size=READ_BYTES_SQL,
            fields=", ".join(PROJECTED_FIELDS),
            nulls=", ".join(["NULL"] * len(PROJECTED_FIELDS)),
        )
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            rows = cursor.fetchall()
        for row in rows:
            if row[1] is None:
                read.left_out_from = row[0]
                continue
            read.bytes_read = max(read.bytes_read, row[-1])
            read.rows.append(row[:-1])
        return read

    def span_start(self, trace: Trace, span_id: bytes) -> int | None:
        params: dict[str, Any] = {"trace": trace.pk, "span": span_id}
        bounds = ""
        if trace.first_span_start_ns is not None and trace.last_span_start_ns is not None:
            # The day partitions that can hold the trace's spans, not every day kept.
            bounds = "AND start_ns BETWEEN %(first)s AND %(last)s"
            params |= {"first": trace.first_span_start_ns, "last": trace.last_span_start_ns}
        with connection.cursor() as cursor:
            cursor.execute(_SPAN_START.format(bounds=bounds), params)
            found = cursor.fetchone()
        return None if found is None else int(found[0])

    def span_content(
        self, trace: Trace, span_id: bytes, start_ns: int, *, chars: int, limit: int
    ) -> list[ContentRow]:
        params: dict[str, Any] = {
            "trace": trace.pk, "span": span_id, "start": start_ns, "chars": chars,
            "limit": limit,
        }  # fmt: skip
        with connection.cursor() as cursor:
            cursor.execute(_ENTRIES, params)
            return list(cursor.fetchall())

    def days_prepare(self, first: date, last: date) -> list[str]:
        return partitions_ensure(_SPANS, first=first, last=last)

    def days_drop(self, cutoff: date) -> list[str]:
        return partitions_drop_before(_SPANS, cutoff=cutoff)

    def bytes_stored(self) -> int:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT COALESCE(sum(pg_total_relation_size(inhrelid)), 0) FROM pg_inherits "
                "WHERE inhparent = %s::regclass",
                [_SPANS],
            )
            row = cursor.fetchone()
        return int(row[0]) if row else 0
