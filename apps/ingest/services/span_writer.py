"""Write decoded spans and assemble them into traces, idempotently.

PostgreSQL: the spans arrive as binary COPY rows (``span_rows``), mostly written
by the request path already. One COPY streams the rows of many batches into a
temporary staging table; SQL then creates the missing trace rows, moves the new
spans into the partitioned span table with ``INSERT … ON CONFLICT DO NOTHING``
(a replayed span is not new) and adds exactly the new ones to their traces'
counters, without a Python pass per span. Other databases take the ORM path with
the same outcome.
"""

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection
from django.utils import timezone

from apps.core.sql_arrays import array_literal
from apps.ingest.decoding.records import SpanRecord
from apps.ingest.models import TraceState
from apps.ingest.services.span_rows import (
    COPY_HEADER,
    COPY_TRAILER,
    STAGING_COLUMNS,
    span_rows,
)

SPAN_COLUMNS = (
    "trace_pk", "span_id", "start_ns", "team_id", "trace_id", "parent_span_id", "name",
    "service", "kind", "end_ns", "status", "status_message", "scope_name", "attributes",
    "events", "received_at",
)  # fmt: skip

# One span as a row in SPAN_COLUMNS order (the ORM path).
SpanRow = tuple[Any, ...]

_STAGING = "ingest_span_rows"
_STAGING_NAMES = ", ".join(name for name, _ in STAGING_COLUMNS)
_CREATE_STAGING = (
    f"CREATE TEMP TABLE IF NOT EXISTS {_STAGING} ("
    + ", ".join(f"{name} {sql_type}" for name, sql_type in STAGING_COLUMNS)
    + ") ON COMMIT DELETE ROWS"
)
# The least parentless span id of a group, by its hex text ('\x…') in byte order: an
# aggregate that hashes, where array_agg(… ORDER BY …) sorts every group.
_LEAST_ROOT_ID = (
    """decode(substr(min(span_id::text COLLATE "C") FILTER (WHERE is_root), 3), 'hex')"""
)
# A span's stored size, about: read from the values' headers, nothing is detoasted.
_SIZE = "octet_length(name) + pg_column_size(attributes) + pg_column_size(events)"
# Trace rows are created in one (team, trace id) order by every drain, so concurrent
# drains creating the same traces queue behind each other instead of deadlocking. A
# trace created here has no stored span yet: all of its spans in this drain are new,
# so it is written once, complete, instead of created and then updated. Copies of a
# span are grouped first, so both levels hash: a DISTINCT count sorts once per trace.
_CREATE_TRACES = f"""
    INSERT INTO ingest_trace (team_id, trace_id, state, first_seen_at, last_span_at,
        span_count, root_span_id, first_span_start_ns, last_span_start_ns, incomplete, error,
        untracked_critical_ns, revision, root_name, root_service, byte_count)
    SELECT team_id, trace_id, {TraceState.OPEN}, %(now)s, %(now)s, count(*),
        {_LEAST_ROOT_ID}, min(start_ns), max(start_ns), false, false, 0, 0, '', '', sum(size)
    FROM (
        SELECT team_id, trace_id, span_id, start_ns, bool_or(parent_span_id IS NULL) AS is_root,
            max({_SIZE}) AS size
        FROM {_STAGING}
        GROUP BY team_id, trace_id, span_id, start_ns
    ) AS spans
    GROUP BY team_id, trace_id
    ORDER BY team_id, trace_id
    ON CONFLICT (team_id, trace_id) DO NOTHING
    RETURNING id, span_count
"""
# Then the touched traces that existed before are locked in id order, for the same
# reason; the ones this drain created are invisible to others until it commits.
_LOCK_TRACES = f"""
    SELECT t.id, t.span_count >= %(cap)s FROM ingest_trace AS t
    WHERE (t.team_id, t.trace_id) IN (SELECT team_id, trace_id FROM {_STAGING})
        AND t.id <> ALL(%(created)s::bigint[])
    ORDER BY t.id FOR UPDATE OF t
"""
# New spans only, and the traces that existed before reopened with the idle clock
# restarted: a span already stored, or a second copy in the same drain, conflicts and
# changes nothing (no DISTINCT needed: DO NOTHING also skips rows this statement
# inserted itself).
_INSERT_SPANS = f"""
    WITH touched AS MATERIALIZED (
        -- The drain's traces by index lookups: joined directly, the planner would hash
        -- the whole trace table (a scan of every trace kept) to match a few thousand.
        SELECT id, team_id, trace_id FROM ingest_trace
        WHERE (team_id, trace_id) IN (SELECT team_id, trace_id FROM {_STAGING})
            -- A full trace takes no more spans (the drain that fills it stores all of its
            -- own): analysis and the trace page load every span of a trace.
            AND (id <> ALL(%(full)s::bigint[]))
    ), inserted AS (
        INSERT INTO ingest_span ({", ".join(SPAN_COLUMNS)})
        SELECT t.id, s.span_id, s.start_ns, s.team_id, s.trace_id, s.parent_span_id, s.name,
            s.service, s.kind, s.end_ns, s.status, s.status_message, s.scope_name,
            s.attributes, s.events, %(now)s
        FROM {_STAGING} AS s
        JOIN touched AS t ON t.team_id = s.team_id AND t.trace_id = s.trace_id
        ON CONFLICT DO NOTHING
        RETURNING trace_pk, span_id, start_ns, parent_span_id IS NULL AS is_root,
            {_SIZE} AS size
    ), per_trace AS (
        SELECT trace_pk, count(*) AS new_spans, sum(size) AS new_bytes,
            {_LEAST_ROOT_ID} AS root,
            min(start_ns) AS first_start, max(start_ns) AS last_start
        FROM inserted GROUP BY trace_pk
    )
    UPDATE ingest_trace AS t SET
        span_count = t.span_count + p.new_spans,
        byte_count = t.byte_count + p.new_bytes,
        last_span_at = %(now)s,
        -- A quarantined trace stays out of analysis until an operator retries it.
        state = CASE WHEN t.state = {TraceState.QUARANTINED} THEN t.state
            ELSE {TraceState.OPEN} END,
        root_span_id = COALESCE(t.root_span_id, p.root),
        first_span_start_ns = LEAST(t.first_span_start_ns, p.first_start),
        last_span_start_ns = GREATEST(t.last_span_start_ns, p.last_start)
    FROM per_trace AS p
    WHERE t.id = p.trace_pk AND t.id <> ALL(%(created)s::bigint[])
    RETURNING p.new_spans
"""

# Counts the spans a full trace was sent in this drain, before they are left out.
_COUNT_DROPPED = f"""
    UPDATE ingest_trace AS t SET spans_dropped = t.spans_dropped + d.spans
    FROM (
        SELECT t.id, count(*) AS spans FROM {_STAGING} AS s
        JOIN ingest_trace AS t ON t.team_id = s.team_id AND t.trace_id = s.trace_id
        WHERE t.id = ANY(%(full)s::bigint[])
        GROUP BY t.id
    ) AS d
    WHERE t.id = d.id
"""


@dataclass
class WriteResult:
    spans_new: int = 0
    traces_touched: int = 0


def span_rows_store(payloads: list[bytes]) -> WriteResult:
    """Store spans given as binary COPY rows (PostgreSQL); call inside a transaction."""
    if not any(payloads):
        return WriteResult()
    now = timezone.now()
    with connection.cursor() as django_cursor:
        cursor = django_cursor.cursor
        cursor.execute(_CREATE_STAGING)
        # Joins and sorts over tens of thousands of wide rows: in memory, not on disk.
        cursor.execute("SET LOCAL work_mem = '64MB'")
        # Empty after every commit (ON COMMIT DELETE ROWS, cheaper than TRUNCATE); rows
        # are left only when an enclosing transaction stored spans before.
        cursor.execute(f"DELETE FROM {_STAGING}")
        with cursor.copy(f"COPY {_STAGING} ({_STAGING_NAMES}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.write(COPY_HEADER)
            for payload in payloads:
                copy.write(payload)
            copy.write(COPY_TRAILER)
        cursor.execute(_CREATE_TRACES, {"now": now})
        created = cursor.fetchall()
        created_pks = array_literal(pk for pk, _ in created)
        cursor.execute(
            _LOCK_TRACES, {"created": created_pks, "cap": settings.INGEST_MAX_SPANS_PER_TRACE}
        )
        full = array_literal(pk for pk, is_full in cursor.fetchall() if is_full)
        if full != "{}":
            cursor.execute(_COUNT_DROPPED, {"full": full})
        # The staging rows meet their traces in a hash join. The planner cannot count the
        # traces touched, guesses few, and would sort every staged row for a merge join:
        # a third of the statement's time.
        cursor.execute("SET LOCAL enable_mergejoin = off")
        cursor.execute(_INSERT_SPANS, {"now": now, "created": created_pks, "full": full})
        counts = [count for _, count in created] + [row[0] for row in cursor.fetchall()]
        cursor.execute("RESET enable_mergejoin")
    return WriteResult(spans_new=sum(counts), traces_touched=len(counts))


def spans_store(*, team_id: int, records: list[SpanRecord]) -> WriteResult:
    """Store one team's spans and bring their traces up to date; call inside a transaction.

    A trace that receives a span it did not have is (re)opened and its idle
    clock restarted; a duplicate span changes nothing.
    """
    return span_rows_store([span_rows(team_id, records)])
