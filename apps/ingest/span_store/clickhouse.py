"""Spans in ClickHouse, PostgreSQL staying the control plane (traces, their state and
counters, and everything derived).

Reads deduplicate by (trace, span, start) themselves and never rely on merges or
``FINAL``: a block inserted twice is stored once by the replicas, but a merge that
would fold two copies may come at any time or never. Attributes and events are stored
as the drain's JSON text; a projected read shapes them in Python as the PostgreSQL
store does in SQL (``python_projection``).
"""

from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import UTC, date, datetime, timedelta
from functools import cached_property
from hashlib import blake2b
from struct import pack
from typing import Any

from apps.core.time import NS_PER_S
from apps.ingest.models import Trace
from apps.ingest.span_store.base import (
    Candidate,
    ContentRow,
    ProjectedRead,
    SearchOrder,
    SearchSet,
    SpanStore,
    SpanStoreUnavailable,
    StoredRow,
    WriteResult,
)
from apps.ingest.span_store.clickhouse_client import ClickHouseConfig, clickhouse
from apps.ingest.span_store.clickhouse_schema import (
    SEARCH_COLUMNS,
    batch_local_table,
    search_local_table,
    search_table,
    span_local_table,
    span_table,
)
from apps.ingest.span_store.projection import SpanProjection
from apps.ingest.span_store.python_projection import (
    PythonProjection,
    content_rows,
    projected_texts,
    read_weight,
)

# Traces named in one query's IN list: the statement stays well under the server's
# max_query_size (256 KiB by default), at about 60 bytes a trace.
TRACES_PER_QUERY = 2000
_STORED = (
    "team_id, trace_id, span_id, has_parent, parent_span_id, name, service, kind, "
    "start_ns, end_ns, attributes, events, status, status_message"
)


def bytes_literal(value: bytes) -> str:
    """Bytes as a ClickHouse string literal (every byte escaped: ids are binary)."""
    return "'" + "".join(f"\\x{b:02x}" for b in value) + "'"


def trace_keys_sql(keys: Iterable[tuple[int, bytes]]) -> str:
    """A ``(team_id, trace_id) IN (…)`` condition's set."""
    return "(" + ", ".join(f"({team}, {bytes_literal(trace)})" for team, trace in keys) + ")"


def day_of(start_ns: int) -> date:
    return datetime.fromtimestamp(start_ns // NS_PER_S, UTC).date()


def _day_bounds(traces: Sequence[Trace]) -> str:
    """The days that can hold the traces' spans, when every trace knows its span starts."""
    firsts = [t.first_span_start_ns for t in traces]
    lasts = [t.last_span_start_ns for t in traces]
    if any(v is None for v in firsts + lasts):
        return ""
    first = min(v for v in firsts if v is not None)
    last = max(v for v in lasts if v is not None)
    return (
        f" AND day BETWEEN '{day_of(first).isoformat()}' AND '{day_of(last).isoformat()}'"
        f" AND start_ns BETWEEN {first} AND {last}"
    )


class ClickHouseSpanStore(SpanStore):
    name = "clickhouse"

    def __init__(self, config: ClickHouseConfig) -> None:
        self.config = config

    @cached_property
    def _writer(self) -> Any:
        from apps.ingest.span_store.clickhouse_writer import ClickHouseSpanWriter

        return ClickHouseSpanWriter(self.config)

    def spans_write(self, batches: list[tuple[int, bytes]]) -> WriteResult:
        result: WriteResult = self._writer.write(batches)
        return result

    def _rows(self, traces: Sequence[Trace]) -> list[tuple[Any, ...]]:
        """The stored spans of ``traces`` (whole, duplicates left out), by trace."""
        rows: list[tuple[Any, ...]] = []
        for chunk in _chunks(list(traces), TRACES_PER_QUERY):
            keys = trace_keys_sql((t.team_id, bytes(t.trace_id)) for t in chunk)
            sql = (
                f"SELECT {_STORED} FROM {span_table(self.config)} "  # noqa: S608
                f"WHERE (team_id, trace_id) IN {keys}{_day_bounds(chunk)}"
            )
            with clickhouse(self.config) as client:
                rows += client.execute(sql)
        return _unique(rows)

    def spans_of_traces(self, traces: Sequence[Trace]) -> list[StoredRow]:
        pks = {(t.team_id, bytes(t.trace_id)): t.pk for t in traces}
        stored = []
        for row in self._rows(traces):
            team, trace, span, has_parent, parent, name, service, kind, start, end = row[:10]
            attributes, events, status = row[10:13]
            stored.append(
                StoredRow(
                    pks[(team, trace)], span, parent if has_parent else None, name.decode(),
                    service.decode(), kind, start, end, attributes.decode(), events.decode(),
                    status,
                )
            )  # fmt: skip
        return stored

    def spans_projected(
        self, traces: Sequence[Trace], projection: SpanProjection, max_bytes: int
    ) -> ProjectedRead:
        read = ProjectedRead()
        shape = PythonProjection(projection)
        by_trace: dict[tuple[int, bytes], list[tuple[Any, ...]]] = defaultdict(list)
        for row in self._rows(traces):
            by_trace[(row[0], row[1])].append(row)
        # Trace after trace in the order given, whole or not at all.
        for trace in traces:
            projected = []
            weight = 0
            for row in by_trace.get((trace.team_id, bytes(trace.trace_id)), ()):
                (_, _, span, has_parent, parent, name, service, kind, start, end,
                 attributes, events, status, message) = row  # fmt: skip
                name_text, service_text, message_text = projected_texts(name, service, message)
                attributes_text = shape.attributes(attributes)
                events_text = shape.events(events)
                weight += read_weight(
                    name_text, service_text, attributes_text, events_text, message_text
                )
                projected.append(
                    (trace.pk, span, parent if has_parent else None, name_text, service_text,
                     kind, start, end, attributes_text, events_text, status, message_text)
                )  # fmt: skip
            if projected and read.bytes_read + weight > max_bytes:
                read.left_out_from = trace.pk
                break
            read.bytes_read += weight
            read.rows += projected
        return read

    def _copies(self, trace: Trace, span_id: bytes, columns: str) -> list[tuple[Any, ...]]:
        sql = (
            f"SELECT start_ns, end_ns, {columns} FROM {span_table(self.config)} "  # noqa: S608
            f"WHERE team_id = {trace.team_id} AND trace_id = {bytes_literal(bytes(trace.trace_id))}"
            f" AND span_id = {bytes_literal(span_id)}{_day_bounds([trace])}"
        )
        with clickhouse(self.config) as client:
            rows: list[tuple[Any, ...]] = client.execute(sql)
        return rows

    def span_start(self, trace: Trace, span_id: bytes) -> int | None:
        copies = self._copies(trace, span_id, "1")
        if not copies:
            return None
        # The copy analysis keeps: ending last, then starting first.
        start, _, _ = min(copies, key=lambda c: (-max(c[0], c[1]), c[0]))
        return int(start)

    def span_content(
        self, trace: Trace, span_id: bytes, start_ns: int, *, chars: int, limit: int
    ) -> list[ContentRow]:
        for start, _, attributes, events in self._copies(trace, span_id, "attributes, events"):
            if start == start_ns:
                return content_rows(attributes, events, chars=chars, limit=limit)
        return []

    keeps_search_sets = True

    def search_sets_write(self, sets: Sequence[SearchSet]) -> None:
        # Built column by column in a deterministic order: a pass redone sends the same
        # block, which the replicas keep once.
        rows = sorted({_set_row(s) for s in sets if s.hashes})
        if not rows:
            return
        columns = [list(column) for column in zip(*rows, strict=True)]
        names = ", ".join(name for name, _ in SEARCH_COLUMNS)
        with clickhouse(self.config) as client:
            client.execute(
                f"INSERT INTO {search_table(self.config)} ({names}) VALUES",
                columns,
                columnar=True,
                types_check=False,
                # Written on a replica of each shard, without the quorum spans take: the
                # trace rows keep every set, so a replica lost for good before its peer
                # fetched the last parts costs nothing that `span_store_migrate
                # --copy-search-sets` cannot write again. And an old server takes one
                # quorum insert at a time per table: concurrent analysis passes would be
                # refused (UNSATISFIED_QUORUM_FOR_PREVIOUS_WRITE) and redone.
                settings={"insert_distributed_sync": 1},
            )

    def search_candidates(
        self,
        *,
        team_id: int,
        groups: Sequence[Sequence[int]],
        order: SearchOrder,
        after: Candidate | None,
        limit: int,
    ) -> list[Candidate]:
        key = "start_ns" if order.by_start else "duration_ns"
        past, direction = ("<", "DESC") if order.descending else (">", "ASC")
        if not groups or not all(groups):
            return []
        conditions = [f"team_id = {int(team_id)}", f"{key} {past} {int(order.boundary)}"]
        if order.start_from is not None:
            conditions.append(f"start_ns >= {int(order.start_from)}")
        if order.start_until is not None:
            conditions.append(f"start_ns < {int(order.start_until)}")
        if after is not None:
            at, pk = int(after[0]), int(after[1])
            conditions.append(f"({key} {past} {at} OR {key} = {at} AND trace_pk {past} {pk})")
        # Each row is one revision of a trace's set: an older one's elements never
        # complete a newer one's.
        # On the elements' low 32 bits: a trace whose set holds another element with the
        # same low bits is named too (about one in 10^8 traces a filter element) and
        # dropped by the caller's check; half the bytes of the full hashes to scan.
        conditions += [f"hasAny(elements, [{_low32_list(g)}])" for g in groups]
        sql = (
            f"SELECT DISTINCT {key}, trace_pk FROM {search_table(self.config)} "  # noqa: S608
            f"WHERE {' AND '.join(conditions)} "
            f"ORDER BY {key} {direction}, trace_pk {direction} LIMIT {int(limit)}"
        )
        with clickhouse(self.config) as client:
            return [(int(k), int(pk)) for k, pk in client.execute(sql)]

    def days_prepare(self, first: date, last: date) -> list[str]:
        return []  # a day's partition comes with its first span

    def days_drop(self, cutoff: date) -> list[str]:
        dropped = []
        tables = (
            span_local_table(self.config),
            batch_local_table(self.config),
            search_local_table(self.config),
        )
        for table in tables:
            for day in self._days(table):
                if day + timedelta(days=1) <= cutoff:
                    self._on_each_shard(f"ALTER TABLE {table} DROP PARTITION '{day.isoformat()}'")
                    dropped.append(f"{table} {day.isoformat()}")
        return dropped

    def _on_each_shard(self, statement: str) -> None:
        """Run ``statement`` on one replica of each shard, which replicates it to the
        others. Not ``ON CLUSTER``: there every replica runs it, and an old server's
        replicas racing on one shard's task can stop its queue of cluster statements."""
        if not self.config.cluster:
            with clickhouse(self.config) as client:
                client.execute(statement)
            return
        with clickhouse(self.config) as client:
            rows = client.execute(
                "SELECT shard_num, host_address, port FROM system.clusters "
                "WHERE cluster = %(cluster)s ORDER BY shard_num, replica_num",
                {"cluster": self.config.cluster},
            )
        replicas: dict[int, list[str]] = defaultdict(list)
        for shard, host, port in rows:
            replicas[shard].append(f"{_text(host)}:{port}")
        for _, addresses in sorted(replicas.items()):
            self._on_first_answering(addresses, statement)

    def _on_first_answering(self, addresses: list[str], statement: str) -> None:
        failure: SpanStoreUnavailable | None = None
        for address in addresses:
            try:
                with clickhouse(self.config.at(address)) as client:
                    client.execute(statement)
                return
            except SpanStoreUnavailable as exc:
                failure = exc
        assert failure is not None
        raise failure

    def _days(self, table: str) -> list[date]:
        """The days ``table`` holds, on any replica of any shard."""
        database, name = table.split(".")
        days: set[date] = set()
        for source in self._parts_tables(first_replicas_only=False):
            with clickhouse(self.config) as client:
                rows = client.execute(
                    f"SELECT DISTINCT partition FROM {source} "  # noqa: S608
                    f"WHERE database = '{database}' AND table = '{name}' AND active"
                )
            days |= {date.fromisoformat(_partition_day(row[0])) for row in rows}
        return sorted(days)

    def _parts_tables(self, *, first_replicas_only: bool) -> list[str]:
        """``system.parts`` of every replica (or each shard's first) as the store's user;
        the one server's own without a cluster."""
        if not self.config.cluster:
            return ["system.parts"]
        first = " AND replica_num = 1" if first_replicas_only else ""
        with clickhouse(self.config) as client:
            rows = client.execute(
                "SELECT host_address, port FROM system.clusters "  # noqa: S608
                f"WHERE cluster = %(cluster)s{first} ORDER BY shard_num, replica_num",
                {"cluster": self.config.cluster},
            )
        user, password = (_quoted(v) for v in (self.config.user, self.config.password))
        return [
            f"remote('{_text(host)}:{port}', system.parts, {user}, {password})"
            for host, port in rows
        ]

    def bytes_stored(self) -> int:
        """The spans' bytes on disk, each shard's first replica counted."""
        database, name = span_local_table(self.config).split(".")
        total = 0
        for source in self._parts_tables(first_replicas_only=True):
            with clickhouse(self.config) as client:
                rows = client.execute(
                    f"SELECT sum(bytes_on_disk) FROM {source} "  # noqa: S608
                    f"WHERE database = '{database}' AND table = '{name}' AND active"
                )
            total += int(rows[0][0] or 0)
        return total


def _set_row(s: SearchSet) -> tuple[date, int, int, int, int, int, tuple[int, ...]]:
    """The row of one revision of a trace's set: its elements' low 32 bits, each once."""
    hashes = sorted(set(s.hashes))
    # Big-endian: the same hash from a pass redone on any host.
    digest = blake2b(pack(f">{len(hashes)}q", *hashes), digest_size=8).digest()
    set_hash = int.from_bytes(digest, "big", signed=True)
    elements = tuple(sorted({_low32(h) for h in hashes}))
    return day_of(s.start_ns), s.team_id, s.start_ns, s.trace_pk, s.duration_ns, set_hash, elements


def _low32(value: int) -> int:
    return value & 0xFFFFFFFF


def _low32_list(hashes: Iterable[int]) -> str:
    # Unsigned: an old server finds no common type for literals of both signs.
    return ", ".join(str(v) for v in sorted({_low32(h) for h in hashes}))


def _quoted(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _partition_day(partition: str | bytes) -> str:
    """A Date partition's value as ``system.parts`` shows it ('2026-12-07' or 20261207)."""
    text = _text(partition).strip("'")
    if "-" not in text:
        text = f"{text[:4]}-{text[4:6]}-{text[6:8]}"
    # An old server shows day 0 (a span that started at the epoch) as 0000-00-00.
    return "1970-01-01" if text.startswith("0000") else text


def _chunks(items: list[Trace], size: int) -> Iterable[list[Trace]]:
    for index in range(0, len(items), size):
        yield items[index : index + size]


def _unique(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """One row per (team, trace, span, start): replicas keep a block inserted twice once,
    but a copy stored by two inserts stays until a merge folds it."""
    seen: set[tuple[Any, ...]] = set()
    unique = []
    for row in rows:
        key = (row[0], row[1], row[2], row[8])
        if key not in seen:
            seen.add(key)
            unique.append(row)
    return unique
