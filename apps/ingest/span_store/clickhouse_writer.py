"""The drain's write to a ClickHouse span store: what is new, one sorted block, then the
trace rows in PostgreSQL.

Inside the drain's transaction, which holds its raw batches:

1. the batches' rows are decoded and their copies folded: a span is (team, trace, span
   id, start), kept from the lowest batch that carries it;
2. what each trace takes is counted, every trace first taken as new (nearly all are).
   The stored spans of the traces that may hold some already are looked up: traces with
   spans before, and those of batches an earlier drain sent but did not commit
   (``span_batches`` records every batch before its spans go). A span stored by another
   batch is not new; one stored by a batch of this drain (its earlier try) is new to
   PostgreSQL but is not sent again. A trace these spans would carry past its limits
   takes them root first, then by start, and counts the rest as dropped, as the
   PostgreSQL store does;
3. the traces are created complete, in one write, in (team, trace) order; those that
   exist (or that another drain creates meanwhile) conflict, and are then locked in id
   order, so that two drains touching one trace take turns, their stored spans looked
   up as above and what they take counted again;
4. the batches are recorded and the new spans inserted as one block sorted by the table's
   key, with the quorum and a synchronous distributed insert: acknowledged means on the
   quorum of each shard's replicas;
5. only then are the old traces' counters written. The drain then deletes its batches
   and commits; if anything fails before, all of it is rolled back, the batches stay and
   the next drain redoes it.

A cluster that refuses (a replica or ZooKeeper away, the quorum short) raises
``SpanStoreUnavailable``: the pass is redone later and no batch is blamed.
"""

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import connection
from django.utils import timezone

from apps.core.sql_arrays import array_literal
from apps.core.time import NS_PER_S
from apps.ingest.models import Trace, TraceState
from apps.ingest.services.span_rows import DecodedRow, span_rows_decode
from apps.ingest.span_store.base import WriteResult
from apps.ingest.span_store.clickhouse import (
    TRACES_PER_QUERY,
    day_of,
    trace_keys_sql,
)
from apps.ingest.span_store.clickhouse_client import ClickHouseConfig, clickhouse
from apps.ingest.span_store.clickhouse_schema import SPAN_COLUMNS, batch_table, span_table
from apps.ingest.trace_fill import TraceFill, trace_fill_remember

_TRACE = Trace._meta.db_table
_NO_PARENT = bytes(8)
# team, trace, span, start
SpanKey = tuple[int, bytes, bytes, int]
TraceKey = tuple[int, bytes]

# The drain's new traces, written once with what they take, in one (team, trace) order
# by every drain so that drains creating the same traces queue instead of deadlocking. A
# trace another drain created meanwhile conflicts and is left out of what is returned.
_CREATE_TRACES = f"""
    INSERT INTO {_TRACE} (team_id, trace_id, state, first_seen_at, last_span_at, span_count,
        incomplete, error, untracked_critical_ns, revision, root_name, root_service,
        byte_count, spans_dropped, bytes_dropped, root_span_id, first_span_start_ns,
        last_span_start_ns)
    SELECT t.team_id, t.trace_id, {TraceState.OPEN}, %(now)s, %(now)s, t.spans, false, false,
        0, 0, '', '', t.bytes, t.dropped, t.dropped_bytes, t.root, t.first_start, t.last_start
    FROM unnest(%(teams)s::bigint[], %(traces)s::bytea[], %(spans)s::int[],
        %(bytes)s::bigint[], %(dropped)s::int[], %(dropped_bytes)s::bigint[],
        %(roots)s::bytea[], %(firsts)s::bigint[], %(lasts)s::bigint[])
        AS t(team_id, trace_id, spans, bytes, dropped, dropped_bytes, root, first_start,
            last_start)
    ORDER BY 1, 2
    ON CONFLICT (team_id, trace_id) DO NOTHING
    RETURNING team_id, trace_id, id
"""  # noqa: S608 - the table's name from the model
_LOCK_TRACES = f"""
    SELECT t.id, t.team_id, t.trace_id, t.span_count, t.byte_count,
        t.root_span_id IS NOT NULL, t.span_count + t.spans_dropped > 0
    FROM {_TRACE} AS t
    WHERE (t.team_id, t.trace_id) IN (
        SELECT * FROM unnest(%(teams)s::bigint[], %(traces)s::bytea[])
    )
    ORDER BY t.id FOR UPDATE OF t
"""  # noqa: S608
# What the drain adds to each trace; reopened with the idle clock restarted, unless an
# operator holds it in quarantine.
_UPDATE_TRACES = f"""
    UPDATE {_TRACE} AS t SET
        span_count = t.span_count + d.spans,
        byte_count = t.byte_count + d.bytes,
        spans_dropped = t.spans_dropped + d.dropped,
        bytes_dropped = t.bytes_dropped + d.dropped_bytes,
        last_span_at = CASE WHEN d.spans > 0 THEN %(now)s ELSE t.last_span_at END,
        state = CASE WHEN d.spans = 0 OR t.state = {TraceState.QUARANTINED} THEN t.state
            ELSE {TraceState.OPEN} END,
        root_span_id = COALESCE(t.root_span_id, d.root),
        first_span_start_ns = LEAST(t.first_span_start_ns, d.first_start),
        last_span_start_ns = GREATEST(t.last_span_start_ns, d.last_start)
    FROM unnest(%(ids)s::bigint[], %(spans)s::int[], %(bytes)s::bigint[], %(dropped)s::int[],
        %(dropped_bytes)s::bigint[], %(roots)s::bytea[], %(firsts)s::bigint[],
        %(lasts)s::bigint[])
        AS d(id, spans, bytes, dropped, dropped_bytes, root, first_start, last_start)
    WHERE t.id = d.id
    RETURNING t.team_id, t.trace_id, t.id, t.span_count, t.byte_count,
        t.root_span_id IS NOT NULL
"""  # noqa: S608


@dataclass
class _Held:
    """A locked trace: what it held before this drain."""

    pk: int
    spans: int
    bytes: int
    has_root: bool
    had_spans: bool


@dataclass
class _Added:
    """What this drain adds to one trace."""

    spans: list[SpanKey] = field(default_factory=list)
    bytes: int = 0
    dropped: int = 0
    dropped_bytes: int = 0


@dataclass
class _Job:
    """One drain's spans, and what is known of them in the store."""

    spans: dict[SpanKey, tuple[int, DecodedRow]]
    by_trace: dict[TraceKey, list[SpanKey]]
    # The batches that carry spans of each trace, and those sent before by a drain that
    # did not commit.
    carried: dict[TraceKey, set[int]]
    resent: set[int]
    batch_ids: set[int]
    # Spans stored already, with the batch that stored them, and the traces looked up.
    stored: dict[SpanKey, int] = field(default_factory=dict)
    looked: set[TraceKey] = field(default_factory=set)


def _size(row: DecodedRow) -> int:
    """A span's size, about, as its readers hold it: its name, attributes and events."""
    return len(row[8]) + len(row[12]) + len(row[13])


_NEW = _Held(pk=0, spans=0, bytes=0, has_root=False, had_spans=False)


class ClickHouseSpanWriter:
    def __init__(self, config: ClickHouseConfig) -> None:
        self.config = config

    def write(self, batches: list[tuple[int, bytes]]) -> WriteResult:
        spans: dict[SpanKey, tuple[int, DecodedRow]] = {}
        # The batches that carry spans of each trace, any copy counted.
        carried: dict[TraceKey, set[int]] = defaultdict(set)
        for batch_id, payload in sorted(batches):
            for row in span_rows_decode(payload):
                spans.setdefault((row[0], row[1], row[2], row[3]), (batch_id, row))
                carried[(row[0], row[1])].add(batch_id)
        if not spans:
            return WriteResult()
        now = timezone.now()
        by_trace: dict[TraceKey, list[SpanKey]] = defaultdict(list)
        for key in spans:
            by_trace[(key[0], key[1])].append(key)
        batch_ids = {batch_id for batch_id, _ in batches}
        job = _Job(spans, by_trace, carried, self._batches_sent(sorted(batch_ids)), batch_ids)
        # Every trace is first taken as new, as nearly all are: created complete, in one
        # write. Those that exist conflict, and are then locked and filled.
        traces = sorted(by_trace)
        added = self._taken(job, {}, traces)
        created = self._traces_create(added, spans, now)
        held: dict[TraceKey, _Held] = {}
        old = [trace for trace in traces if trace not in created]
        if old:
            held = self._traces_lock(old)
            added |= self._taken(job, held, old)
            # One deleted since it conflicted takes nothing, as in the PostgreSQL store.
            for trace in old:
                if trace not in held:
                    del added[trace]
        block = [
            spans[key] for taken in added.values() for key in taken.spans if key not in job.stored
        ]
        self._insert(block, batch_ids, now)
        self._traces_update({trace: added[trace] for trace in held}, held, spans, now)
        # ``added`` holds the traces created and those locked: every trace that took spans.
        return WriteResult(
            spans_new=sum(len(taken.spans) for taken in added.values()),
            traces_touched=sum(1 for taken in added.values() if taken.spans),
        )

    def _traces_lock(self, traces: list[TraceKey]) -> dict[TraceKey, _Held]:
        """The traces of these that exist, locked, with what they hold."""
        params: dict[str, Any] = {
            "teams": array_literal([team for team, _ in traces]),
            "traces": [trace for _, trace in traces],
        }
        with connection.cursor() as cursor:
            cursor.execute(_LOCK_TRACES, params)
            rows = cursor.fetchall()
        return {
            (team, bytes(trace)): _Held(pk, count, size, root, had)
            for pk, team, trace, count, size, root, had in rows
        }

    def _taken(
        self, job: _Job, held: dict[TraceKey, _Held], traces: list[TraceKey]
    ) -> dict[TraceKey, _Added]:
        """What each of these traces takes of the drain's spans: the new ones, within its
        limits. A trace without a row yet holds nothing, in PostgreSQL; ClickHouse may
        hold spans of it that a drain sent without committing."""
        look = [
            trace
            for trace in traces
            if trace not in job.looked
            and ((trace in held and held[trace].had_spans) or job.carried[trace] & job.resent)
        ]
        job.stored |= self._stored(job.by_trace, look)
        job.looked.update(look)
        added: dict[TraceKey, _Added] = {}
        for trace in traces:
            # Spans another batch stored are not new; this drain's own earlier try's are.
            fresh = [
                key
                for key in job.by_trace[trace]
                if job.stored.get(key) is None or job.stored[key] in job.batch_ids
            ]
            added[trace] = self._within_limits(fresh, held.get(trace, _NEW), job.spans)
        return added

    def _stored(
        self, by_trace: dict[TraceKey, list[SpanKey]], look: list[TraceKey]
    ) -> dict[SpanKey, int]:
        """The spans of these traces stored already, with the batch that stored them.

        Read from whichever replica answers, without ``select_sequential_consistency``
        (an old server keeps refusing it once a day it counted in a quorum is dropped):
        an acknowledged insert is on the quorum, and a refused one that reached a replica
        is found here or, sent again as the same block, stored once by the replicas."""
        stored: dict[SpanKey, int] = {}
        look = sorted(look)
        for index in range(0, len(look), TRACES_PER_QUERY):
            chunk = look[index : index + TRACES_PER_QUERY]
            sql = (
                f"SELECT team_id, trace_id, span_id, start_ns, batch_id "  # noqa: S608
                f"FROM {span_table(self.config)} "
                f"WHERE (team_id, trace_id) IN {trace_keys_sql(chunk)}"
            )
            with clickhouse(self.config) as client:
                rows = client.execute(sql)
            wanted = {key for trace in chunk for key in by_trace[trace]}
            for team, trace, span, start, batch_id in rows:
                key = (team, trace, span, start)
                if key in wanted:
                    stored[key] = min(batch_id, stored.get(key, batch_id))
        return stored

    def _batches_sent(self, batch_ids: list[int]) -> set[int]:
        """Of these batches, those an earlier drain sent without committing."""
        ids = ", ".join(str(i) for i in batch_ids)
        with clickhouse(self.config) as client:
            rows = client.execute(
                f"SELECT DISTINCT batch_id FROM {batch_table(self.config)} "  # noqa: S608
                f"WHERE batch_id IN ({ids})"
            )
        return {row[0] for row in rows}

    def _within_limits(
        self, fresh: list[SpanKey], held: _Held, spans: dict[SpanKey, tuple[int, DecodedRow]]
    ) -> _Added:
        """The new spans a trace takes within its limits of spans and bytes, root first
        (analysis needs it: a trace without one takes its first root whatever its size),
        then by start; the rest counted as dropped."""
        max_spans = settings.INGEST_MAX_SPANS_PER_TRACE
        max_bytes = settings.INGEST_MAX_TRACE_BYTES
        sizes = {k: _size(spans[k][1]) for k in fresh}
        added = _Added()
        if held.spans + len(fresh) <= max_spans and held.bytes + sum(sizes.values()) <= max_bytes:
            added.spans = fresh
            added.bytes = sum(sizes.values())
            return added

        def order(key: SpanKey) -> tuple[Any, ...]:
            is_root = spans[key][1][7] is None
            return (not is_root, key[2] if is_root else b"", key[3], key[2])

        running = 0
        for rank, key in enumerate(sorted(fresh, key=order), start=1):
            running += sizes[key]
            first_root = rank == 1 and spans[key][1][7] is None and not held.has_root
            over = held.spans + rank > max_spans or held.bytes + running > max_bytes
            if over and not first_root:
                added.dropped += 1
                added.dropped_bytes += sizes[key]
            else:
                added.spans.append(key)
                added.bytes += sizes[key]
        return added

    def _insert(self, block: list[tuple[int, DecodedRow]], batch_ids: set[int], now: Any) -> None:
        """Record the batches, then insert the spans as one block in the table's order: the
        same spans make the same block, which the replicas store once."""
        received_ns = int(now.timestamp() * NS_PER_S)
        today = now.date()
        block.sort(key=lambda item: (item[1][0], item[1][1], item[1][2], item[1][3]))
        columns: list[list[Any]] = [[] for _ in SPAN_COLUMNS]
        for batch_id, row in block:
            team, trace, span, start, end, kind, status, parent = row[:8]
            values = (
                day_of(start), team, trace, span, start, end, parent is not None,
                parent or _NO_PARENT, kind, status, *row[8:], received_ns, batch_id,
            )  # fmt: skip
            for column, value in zip(columns, values, strict=True):
                column.append(value)
        insert = self.config.insert_settings
        names = ", ".join(name for name, _ in SPAN_COLUMNS)
        with clickhouse(self.config) as client:
            client.execute(
                f"INSERT INTO {batch_table(self.config)} (day, batch_id) VALUES",
                [(today, batch_id) for batch_id in sorted(batch_ids)],
                settings=insert,
            )
            if block:
                client.execute(
                    f"INSERT INTO {span_table(self.config)} ({names}) VALUES",
                    columns,
                    columnar=True,
                    types_check=False,
                    settings=insert,
                )

    def _traces_create(
        self,
        added: dict[TraceKey, _Added],
        spans: dict[SpanKey, tuple[int, DecodedRow]],
        now: Any,
    ) -> dict[TraceKey, int]:
        """Create the new traces with what they take; return those created, by pk."""
        if not added:
            return {}
        traces = sorted(added)
        params = {
            "now": now,
            "teams": array_literal([team for team, _ in traces]),
            "traces": [trace for _, trace in traces],
            **_figures([added[trace] for trace in traces], spans),
        }
        with connection.cursor() as cursor:
            cursor.execute(_CREATE_TRACES, params)
            created = {(team, bytes(trace)): pk for team, trace, pk in cursor.fetchall()}
        trace_fill_remember(
            fills=[
                TraceFill(
                    trace[0],
                    trace[1],
                    pk,
                    len(added[trace].spans),
                    added[trace].bytes,
                    any(spans[key][1][7] is None for key in added[trace].spans),
                )
                for trace, pk in created.items()
            ]
        )
        return created

    def _traces_update(
        self,
        added: dict[TraceKey, _Added],
        held: dict[TraceKey, _Held],
        spans: dict[SpanKey, tuple[int, DecodedRow]],
        now: Any,
    ) -> None:
        """Add to the old traces what they take."""
        if not added:
            return
        traces = list(added)
        params = {
            "now": now,
            "ids": array_literal([held[trace].pk for trace in traces]),
            **_figures([added[trace] for trace in traces], spans),
        }
        with connection.cursor() as cursor:
            cursor.execute(_UPDATE_TRACES, params)
            updated = cursor.fetchall()
        trace_fill_remember(
            fills=[
                TraceFill(team, bytes(trace), pk, count, size, root)
                for team, trace, pk, count, size, root in updated
            ]
        )


def _figures(added: list[_Added], spans: dict[SpanKey, tuple[int, DecodedRow]]) -> dict[str, Any]:
    """What the drain adds to each of these traces, as the arrays its SQL takes."""
    firsts: list[int | None] = []
    lasts: list[int | None] = []
    roots: list[bytes | None] = []
    for taken in added:
        starts = [key[3] for key in taken.spans]
        root_ids = [key[2] for key in taken.spans if spans[key][1][7] is None]
        roots.append(min(root_ids) if root_ids else None)
        firsts.append(min(starts) if starts else None)
        lasts.append(max(starts) if starts else None)
    return {
        "spans": array_literal([len(taken.spans) for taken in added]),
        "bytes": array_literal([taken.bytes for taken in added]),
        "dropped": array_literal([taken.dropped for taken in added]),
        "dropped_bytes": array_literal([taken.dropped_bytes for taken in added]),
        "roots": roots,
        "firsts": array_literal(firsts),
        "lasts": array_literal(lasts),
    }
