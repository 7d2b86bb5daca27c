"""Write decoded spans and assemble them into traces, idempotently.

PostgreSQL: the spans arrive as binary COPY rows (``span_rows``), mostly written
by the request path already. One COPY streams the rows of many batches into a
temporary staging table; SQL then creates the missing trace rows, moves the new
spans into the partitioned span table with ``INSERT … ON CONFLICT DO NOTHING``
(a replayed span is not new) and adds exactly the new ones to their traces'
counters, without a Python pass per span. A trace that this drain would carry past
its limits of spans or bytes takes what fits, and counts the rest it refused: the only
path that sorts spans, taken by full traces alone.
"""

from typing import Any

from django.conf import settings
from django.db import connection
from django.utils import timezone

from apps.core.sql_arrays import array_literal
from apps.ingest.models import Span, Trace, TraceState
from apps.ingest.services.span_rows import (
    COPY_HEADER,
    COPY_TRAILER,
    STAGING_COLUMNS,
)
from apps.ingest.span_store.base import WriteResult
from apps.ingest.trace_fill import TraceFill, trace_fill_remember

SPAN_COLUMNS = (
    "trace_pk", "span_id", "start_ns", "team_id", "trace_id", "parent_span_id", "name",
    "service", "kind", "end_ns", "status", "status_message", "scope_name", "attributes",
    "events", "received_at",
)  # fmt: skip

# One span as a row in SPAN_COLUMNS order (the ORM path).
SpanRow = tuple[Any, ...]

# Table names from the models, so that SQL follows a rename.
_TRACE = Trace._meta.db_table
_SPAN = Span._meta.db_table
_STAGING = "ingest_span_rows"
_STAGING_NAMES = ", ".join(name for name, _ in STAGING_COLUMNS)
# ``refused`` is not in the rows: the drain marks the spans a full trace cannot take.
_CREATE_STAGING = (
    f"CREATE TEMP TABLE IF NOT EXISTS {_STAGING} ("
    + ", ".join(f"{name} {sql_type}" for name, sql_type in STAGING_COLUMNS)
    + ", refused boolean NOT NULL DEFAULT false) ON COMMIT DELETE ROWS"
)
# The least parentless span id of a group, by its hex text ('\x…') in byte order: an
# aggregate that hashes, where array_agg(… ORDER BY …) sorts every group.
_LEAST_ROOT_ID = (
    """decode(substr(min(span_id::text COLLATE "C") FILTER (WHERE is_root), 3), 'hex')"""
)


def _expanded(column: str) -> str:
    # jsonb compresses a large value, so its stored size says little about what a reader
    # holds once it is loaded: a compressed value is measured as text, expanded. The
    # common small value is stored as it is and measured from its header.
    return (
        f"CASE WHEN pg_column_compression({column}) IS NULL THEN pg_column_size({column}) "
        f"ELSE octet_length({column}::text) END"
    )


# A span's size, about, as its readers hold it: its name, attributes and events.
_SIZE = f"octet_length(name) + {_expanded('attributes')} + {_expanded('events')}"
# Copies of a span (a batch sent twice) are grouped, so that each span counts once.
_STAGED_SPANS = f"""
    SELECT team_id, trace_id, span_id, start_ns, bool_or(parent_span_id IS NULL) AS is_root,
        max({_SIZE}) AS size
    FROM {_STAGING}
    GROUP BY team_id, trace_id, span_id, start_ns
"""
# Trace rows are created in one (team, trace id) order by every drain, so concurrent
# drains creating the same traces queue behind each other instead of deadlocking. A
# trace created here has no stored span yet: when all of its spans in this drain fit its
# limits, they are all new, so it is written once, complete, instead of created and then
# updated. One that does not fit is created empty, and filled like a trace that existed.
# Every staged trace is returned with its staged spans and bytes, created or not.
_CREATE_TRACES = f"""
    WITH staged AS MATERIALIZED (
        SELECT team_id, trace_id, count(*) AS spans, sum(size) AS bytes,
            {_LEAST_ROOT_ID} AS root, min(start_ns) AS first_start, max(start_ns) AS last_start,
            count(*) <= %(max_spans)s AND sum(size) <= %(max_bytes)s AS fits
        FROM ({_STAGED_SPANS}) AS spans
        GROUP BY team_id, trace_id
    ), created AS (
        INSERT INTO {_TRACE} (team_id, trace_id, state, first_seen_at, last_span_at,
            span_count, root_span_id, first_span_start_ns, last_span_start_ns, incomplete,
            error, untracked_critical_ns, revision, root_name, root_service, byte_count)
        SELECT team_id, trace_id, {TraceState.OPEN}, %(now)s, %(now)s,
            CASE WHEN fits THEN spans ELSE 0 END, CASE WHEN fits THEN root END,
            CASE WHEN fits THEN first_start END, CASE WHEN fits THEN last_start END,
            false, false, 0, 0, '', '', CASE WHEN fits THEN bytes ELSE 0 END
        FROM staged
        ORDER BY team_id, trace_id
        ON CONFLICT (team_id, trace_id) DO NOTHING
        RETURNING id, team_id, trace_id, span_count
    )
    SELECT s.team_id, s.trace_id, s.spans, s.bytes, s.root IS NOT NULL, c.id, c.span_count
    FROM staged AS s LEFT JOIN created AS c ON c.team_id = s.team_id AND c.trace_id = s.trace_id
"""
# Then the touched traces that were not written complete are locked in id order, for the
# same reason; the ones this drain created are invisible to others until it commits.
_LOCK_TRACES = f"""
    SELECT t.id, t.team_id, t.trace_id, t.span_count, t.byte_count, t.root_span_id IS NOT NULL
    FROM {_TRACE} AS t
    WHERE (t.team_id, t.trace_id) IN (SELECT team_id, trace_id FROM {_STAGING})
        AND t.id <> ALL(%(created)s::bigint[])
    ORDER BY t.id FOR UPDATE OF t
"""
# A trace these spans would carry past a limit takes them in order, root first (analysis
# needs it), then by start, while it stays within both; the rest are refused and counted
# on the trace. A trace without a root takes its first root whatever its size, so that a
# trace cut short is still analyzed: one span of slack. Spans it holds already (a batch
# sent again) are neither counted nor refused.
_REFUSE_OVER_LIMITS = f"""
    WITH ranked AS (
        SELECT s.team_id, s.trace_id, s.span_id, s.start_ns, s.size, t.id AS trace_pk,
            s.is_root AND t.root_span_id IS NULL AND row_number() OVER w = 1 AS first_root,
            t.span_count + row_number() OVER w > %(max_spans)s
                OR t.byte_count + sum(s.size) OVER w > %(max_bytes)s AS over
        FROM ({_STAGED_SPANS}) AS s
        JOIN {_TRACE} AS t ON t.team_id = s.team_id AND t.trace_id = s.trace_id
        WHERE t.id = ANY(%(tight)s::bigint[])
            AND NOT EXISTS (
                SELECT FROM {_SPAN} AS stored WHERE stored.trace_pk = t.id
                    AND stored.span_id = s.span_id AND stored.start_ns = s.start_ns
            )
        WINDOW w AS (
            PARTITION BY t.id
            ORDER BY s.is_root DESC, CASE WHEN s.is_root THEN s.span_id END, s.start_ns, s.span_id
        )
    ), refused AS MATERIALIZED (
        SELECT * FROM ranked WHERE over AND NOT first_root
    ), marked AS (
        UPDATE {_STAGING} AS s SET refused = true FROM refused AS r
        WHERE s.team_id = r.team_id AND s.trace_id = r.trace_id AND s.span_id = r.span_id
            AND s.start_ns = r.start_ns
    )
    UPDATE {_TRACE} AS t SET spans_dropped = t.spans_dropped + d.spans,
        bytes_dropped = t.bytes_dropped + d.bytes
    FROM (
        SELECT trace_pk, count(*) AS spans, sum(size) AS bytes FROM refused GROUP BY trace_pk
    ) AS d
    WHERE t.id = d.trace_pk
"""
# New spans only, and the traces not written complete updated, reopened with the idle
# clock restarted: a span already stored, or a second copy in the same drain, conflicts
# and changes nothing (no DISTINCT needed: DO NOTHING also skips rows this statement
# inserted itself).
_INSERT_SPANS = f"""
    WITH touched AS MATERIALIZED (
        -- The drain's traces by index lookups: joined directly, the planner would hash
        -- the whole trace table (a scan of every trace kept) to match a few thousand.
        SELECT id, team_id, trace_id FROM {_TRACE}
        WHERE (team_id, trace_id) IN (SELECT team_id, trace_id FROM {_STAGING})
    ), inserted AS (
        INSERT INTO {_SPAN} ({", ".join(SPAN_COLUMNS)})
        SELECT t.id, s.span_id, s.start_ns, s.team_id, s.trace_id, s.parent_span_id, s.name,
            s.service, s.kind, s.end_ns, s.status, s.status_message, s.scope_name,
            s.attributes, s.events, %(now)s
        FROM {_STAGING} AS s
        JOIN touched AS t ON t.team_id = s.team_id AND t.trace_id = s.trace_id
        WHERE NOT s.refused
        ON CONFLICT DO NOTHING
        -- Sizes are measured once: a trace created complete counted its own already.
        RETURNING trace_pk, span_id, start_ns, parent_span_id IS NULL AS is_root,
            CASE WHEN trace_pk = ANY(%(created)s::bigint[]) THEN 0 ELSE {_SIZE} END AS size
    ), per_trace AS (
        SELECT trace_pk, count(*) AS new_spans, sum(size) AS new_bytes,
            {_LEAST_ROOT_ID} AS root,
            min(start_ns) AS first_start, max(start_ns) AS last_start
        FROM inserted GROUP BY trace_pk
    )
    UPDATE {_TRACE} AS t SET
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
    RETURNING p.new_spans, t.team_id, t.trace_id, t.id, t.span_count, t.byte_count,
        t.root_span_id IS NOT NULL
"""


def span_rows_store(payloads: list[bytes]) -> WriteResult:
    """Store spans given as binary COPY rows (PostgreSQL); call inside a transaction.

    A trace holds at most ``INGEST_MAX_SPANS_PER_TRACE`` spans and
    ``INGEST_MAX_TRACE_BYTES`` bytes (plus its root, should that come last): spans past
    either are left out and counted on the trace (``spans_dropped``, ``bytes_dropped``).
    """
    if not any(payloads):
        return WriteResult()
    now = timezone.now()
    limits = {
        "max_spans": settings.INGEST_MAX_SPANS_PER_TRACE,
        "max_bytes": settings.INGEST_MAX_TRACE_BYTES,
    }
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
        cursor.execute(_CREATE_TRACES, {"now": now, **limits})
        staged: dict[tuple[int, bytes], tuple[int, int]] = {}
        complete: dict[int, int] = {}  # traces created with all of their spans
        # What the drain leaves in each trace, for the request path (trace_fill).
        fills: list[TraceFill] = []
        for team_id, trace_id, spans, size, root, created_pk, created_spans in cursor.fetchall():
            if created_spans:
                complete[created_pk] = created_spans
                fills.append(TraceFill(team_id, bytes(trace_id), created_pk, spans, size, root))
            else:
                staged[(team_id, bytes(trace_id))] = (spans, size)
        created_pks = array_literal(complete)
        cursor.execute(_LOCK_TRACES, {"created": created_pks})
        tight = []
        for pk, team_id, trace_id, held_spans, held_bytes, root in cursor.fetchall():
            if _over_limits(staged[(team_id, bytes(trace_id))], held_spans, held_bytes, limits):
                tight.append(pk)
                # Held at least this much; if it takes spans, the update below says more.
                fills.append(TraceFill(team_id, bytes(trace_id), pk, held_spans, held_bytes, root))
        if tight:
            cursor.execute(_REFUSE_OVER_LIMITS, {"tight": array_literal(tight), **limits})
        # The staging rows meet their traces in a hash join. The planner cannot count the
        # traces touched, guesses few, and would sort every staged row for a merge join:
        # a third of the statement's time.
        cursor.execute("SET LOCAL enable_mergejoin = off")
        cursor.execute(_INSERT_SPANS, {"now": now, "created": created_pks})
        updated = cursor.fetchall()
        cursor.execute("RESET enable_mergejoin")
    counts = [*complete.values(), *(row[0] for row in updated)]
    fills += [
        TraceFill(team, bytes(trace), pk, spans, size, root)
        for _, team, trace, pk, spans, size, root in updated
    ]
    trace_fill_remember(fills=fills)
    return WriteResult(spans_new=sum(counts), traces_touched=len(counts))


def _over_limits(
    staged: tuple[int, int], held_spans: int, held_bytes: int, limits: dict[str, int]
) -> bool:
    """Whether a trace's staged spans, all new, would carry it past a limit."""
    spans, size = staged
    return held_spans + spans > limits["max_spans"] or held_bytes + size > limits["max_bytes"]
