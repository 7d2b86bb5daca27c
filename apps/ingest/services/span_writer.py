"""Write decoded spans and assemble them into traces, idempotently.

PostgreSQL: spans go through binary COPY into a temporary staging table, then
``INSERT … ON CONFLICT DO NOTHING RETURNING`` moves the new ones into the
partitioned span table and tells exactly which spans were new. Other databases
take the ORM path with the same outcome.
"""

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import msgspec
from django.db import connection
from django.utils import timezone

from apps.ingest.decoding.records import KINDS, STATUSES, SpanRecord
from apps.ingest.models import Span, Trace, TraceState

KIND_CODES = {name: code for code, name in enumerate(KINDS)}
STATUS_CODES = {name: code for code, name in enumerate(STATUSES)}

SPAN_COLUMNS = (
    "trace_pk", "span_id", "start_ns", "team_id", "trace_id", "parent_span_id", "name",
    "service", "kind", "end_ns", "status", "status_message", "scope_name", "attributes",
    "events", "received_at",
)  # fmt: skip
SPAN_TYPES = (
    "int8", "bytea", "int8", "int8", "bytea", "bytea", "text", "text", "int2", "int8",
    "int2", "text", "text", "jsonb", "jsonb", "timestamptz",
)  # fmt: skip

_json = msgspec.json.Encoder()

# One span as a row in SPAN_COLUMNS order.
SpanRow = tuple[Any, ...]


@dataclass
class WriteResult:
    spans_new: int = 0
    traces_touched: int = 0


def _events_json(record: SpanRecord) -> list[dict[str, object]]:
    return [
        {
            "name": e.name,
            "time_ns": e.time_ns,
            **({"attributes": e.attributes} if e.attributes else {}),
        }
        for e in record.events
    ]


def _unique(records: list[SpanRecord]) -> list[SpanRecord]:
    seen: dict[tuple[bytes, bytes], SpanRecord] = {}
    for record in records:
        seen.setdefault((record.trace_id, record.span_id), record)
    return list(seen.values())


def _trace_pks(team_id: int, trace_ids: set[bytes], now: datetime) -> dict[bytes, int]:
    """Ids of the team's trace rows, creating the missing ones (open, no spans yet)."""
    if connection.vendor == "postgresql":
        return _trace_pks_postgres(team_id, trace_ids, now)
    existing = dict(
        Trace.objects.filter(team_id=team_id, trace_id__in=list(trace_ids)).values_list(
            "trace_id", "id"
        )
    )
    found = {bytes(k): v for k, v in existing.items()}
    missing = trace_ids - set(found)
    if missing:
        Trace.objects.bulk_create(
            [
                Trace(team_id=team_id, trace_id=tid, first_seen_at=now, last_span_at=now)
                for tid in sorted(missing)  # one insertion order for every drain
            ],
            ignore_conflicts=True,  # a concurrent drain may create the same trace
        )
        created = Trace.objects.filter(team_id=team_id, trace_id__in=list(missing)).values_list(
            "trace_id", "id"
        )
        found.update({bytes(k): v for k, v in created})
    return found


def _trace_pks_postgres(team_id: int, trace_ids: set[bytes], now: datetime) -> dict[bytes, int]:
    # Arrays as single parameters: thousands of ids without thousands of placeholders.
    ordered = sorted(trace_ids)  # one insertion order for every drain
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO ingest_trace (team_id, trace_id, state, first_seen_at, last_span_at,
                span_count, incomplete, error, untracked_critical_ns, revision, root_name,
                root_service)
            SELECT %s, tid, %s, %s, %s, 0, false, false, 0, 0, '', ''
            FROM unnest(%s::bytea[]) AS tid
            ON CONFLICT (team_id, trace_id) DO NOTHING
            """,
            [team_id, TraceState.OPEN, now, now, ordered],
        )
        cursor.execute(
            "SELECT trace_id, id FROM ingest_trace WHERE team_id = %s AND trace_id = ANY(%s)",
            [team_id, ordered],
        )
        return {bytes(tid): pk for tid, pk in cursor.fetchall()}


def _copy_new_spans_postgres(
    rows: list[SpanRow],
) -> list[tuple[int, bytes, bool]]:
    from psycopg.types.json import Jsonb

    def jsonb(value: object) -> Jsonb:
        return Jsonb(value, dumps=lambda obj: _json.encode(obj).decode())

    columns = ", ".join(SPAN_COLUMNS)
    with connection.cursor() as django_cursor:
        cursor = django_cursor.cursor
        cursor.execute(
            "CREATE TEMP TABLE IF NOT EXISTS ingest_span_staging "
            "(LIKE ingest_span INCLUDING DEFAULTS) ON COMMIT DELETE ROWS"
        )
        with cursor.copy(
            f"COPY ingest_span_staging ({columns}) FROM STDIN (FORMAT BINARY)"
        ) as copy:
            copy.set_types(list(SPAN_TYPES))
            for row in rows:
                copy.write_row((*row[:13], jsonb(row[13]), jsonb(row[14]), row[15]))
        cursor.execute(
            f"INSERT INTO ingest_span ({columns}) SELECT {columns} FROM ingest_span_staging "
            "ON CONFLICT DO NOTHING RETURNING trace_pk, span_id, parent_span_id IS NULL"
        )
        inserted = [(int(r[0]), bytes(r[1]), bool(r[2])) for r in cursor.fetchall()]
        cursor.execute("TRUNCATE ingest_span_staging")
    return inserted


def _insert_new_spans_orm(rows: list[SpanRow]) -> list[tuple[int, bytes, bool]]:
    trace_pks = {row[0] for row in rows}
    stored = {
        (pk, bytes(sid))
        for pk, sid in Span.objects.filter(trace_pk__in=trace_pks).values_list(
            "trace_pk", "span_id"
        )
    }
    fresh = [row for row in rows if (row[0], row[1]) not in stored]
    Span.objects.bulk_create(
        [Span(**dict(zip(SPAN_COLUMNS, row, strict=True))) for row in fresh],
        ignore_conflicts=True,
        batch_size=500,
    )
    return [(int(row[0]), bytes(row[1]), row[5] is None) for row in fresh]


def spans_store(*, team_id: int, records: list[SpanRecord]) -> WriteResult:
    """Store one team's spans and bring their traces up to date; call inside a transaction.

    A trace that receives a span it did not have is (re)opened and its idle
    clock restarted; a duplicate span changes nothing.
    """
    records = _unique(records)
    if not records:
        return WriteResult()
    now = timezone.now()
    pks = _trace_pks(team_id, {r.trace_id for r in records}, now)
    rows: list[SpanRow] = [
        (
            pks[r.trace_id],
            r.span_id,
            r.start_ns,
            team_id,
            r.trace_id,
            r.parent_span_id,
            r.name,
            r.service,
            KIND_CODES.get(r.kind, 0),
            r.end_ns,
            STATUS_CODES.get(r.status, 0),
            r.status_message,
            r.scope_name,
            r.attributes,
            _events_json(r),
            now,
        )
        for r in records
    ]
    if connection.vendor == "postgresql":
        inserted = _copy_new_spans_postgres(rows)
    else:
        inserted = _insert_new_spans_orm(rows)

    new_per_trace: dict[int, int] = defaultdict(int)
    roots: dict[int, bytes] = {}
    for trace_pk, span_id, is_root in inserted:
        new_per_trace[trace_pk] += 1
        if is_root:
            roots.setdefault(trace_pk, span_id)
    _traces_touch(new_per_trace, roots, now)
    return WriteResult(spans_new=len(inserted), traces_touched=len(new_per_trace))


def _traces_touch(new_per_trace: dict[int, int], roots: dict[int, bytes], now: datetime) -> None:
    if not new_per_trace:
        return
    if connection.vendor == "postgresql":
        ids = sorted(new_per_trace)
        with connection.cursor() as cursor:
            # Lock in id order first: concurrent drains touching the same traces
            # then queue behind each other instead of deadlocking.
            cursor.execute(
                "SELECT id FROM ingest_trace WHERE id = ANY(%s) ORDER BY id FOR UPDATE", [ids]
            )
            cursor.execute(
                f"""
                UPDATE ingest_trace AS t SET
                    span_count = t.span_count + v.n,
                    last_span_at = %s,
                    state = {TraceState.OPEN},
                    root_span_id = COALESCE(t.root_span_id, v.root)
                FROM unnest(%s::bigint[], %s::int[], %s::bytea[]) AS v(id, n, root)
                WHERE t.id = v.id
                """,
                [now, ids, [new_per_trace[i] for i in ids], [roots.get(i) for i in ids]],
            )
        return
    for trace in Trace.objects.filter(pk__in=list(new_per_trace)):
        trace.span_count += new_per_trace[trace.pk]
        trace.last_span_at = now
        trace.state = TraceState.OPEN
        if trace.root_span_id is None and trace.pk in roots:
            trace.root_span_id = roots[trace.pk]
        trace.save(update_fields=["span_count", "last_span_at", "state", "root_span_id"])
