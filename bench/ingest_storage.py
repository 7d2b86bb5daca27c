"""The ingest benchmark's span store, and the storage each end-to-end phase leaves.

``BENCH_SPAN_STORE_URL`` chooses where spans go (unset: PostgreSQL's day partitions);
a ClickHouse database is dropped and made again before the run and before each phase,
as PostgreSQL's tables are truncated. Not its days dropped: on 18.16 a dropped partition
stays named in the quorum's last parts, and every read with
``select_sequential_consistency`` (the drain's) fails from then on. The statements are
``span_store_migrate``'s, sent to each replica in turn rather than ``ON CLUSTER``: a
replica whose DDL worker has stopped (18.16 stops it on an unexpected ZooKeeper error,
until the server restarts) never answers the cluster's DDL queue.

Per phase, from its start to the last trace finalized:

- PostgreSQL's WAL: ``pg_current_wal_lsn()`` and ``pg_stat_wal.wal_bytes`` moved by. Both
  are the whole server's (PostgreSQL counts WAL per server, not per database), so on a
  server shared with other work they are upper bounds; the WAL written in a few quiet
  seconds before the phase shows how much the others add. Where this machine holds the
  server's WAL and ``pg_waldump``, the records of the phase that touch the bench's
  database are summed too (``_WalCopy``): the database's own WAL.
- PostgreSQL's tables: the growth of the span table (every partition, with indexes and
  TOAST), the traces and the stage samples, each per span stored.
- PostgreSQL's statements: where the server loads ``pg_stat_statements``, the time the
  bench database's statements took to plan and run, per span, and the five that took
  most. Unlike the CPU of its backends, it leaves out what other work on the machine
  makes them wait for, so it compares two stores on a busy machine better.
- ClickHouse: on each replica, ``spans_local``'s active parts (bytes on disk, and the
  columns' bytes uncompressed) per span that replica holds; and the search sets'
  (``trace_sets_local``) bytes on disk over every replica, per span.
"""

import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from django.core.management import call_command
from django.db import DatabaseError, connection

# Seconds of WAL watched before a phase, while nothing of the bench writes.
QUIET_S = 5.0


def span_store_prepare(url: str) -> None:
    """A ClickHouse store's database dropped and its tables made anew on every replica,
    and the trace rows' search index set to suit the store, as ``span_store_migrate``
    does on a deployment."""
    from apps.ingest.services.search_index import search_index_sync
    from apps.ingest.span_store import span_store

    _tables_make(url)
    search_index_sync(span_store())


def _tables_make(url: str) -> None:
    if not url:
        return
    from clickhouse_driver import Client

    from apps.ingest.span_store.clickhouse_client import clickhouse_config
    from apps.ingest.span_store.clickhouse_schema import schema_statements

    config = clickhouse_config(url)
    if not config.cluster:
        with Client.from_url(config.driver_url) as client:
            client.execute(f"DROP DATABASE IF EXISTS {config.database}")
        call_command("span_store_migrate")
        return
    statements = [s.replace(config.on_cluster, "") for s in schema_statements(config)]
    replicas = [Client(host, port=port, user=config.user, password=config.password)
                for host, port in _replicas(url).values()]  # fmt: skip
    # Every replica's tables dropped before any is made: a replica made again beside an
    # old one would fetch the old one's parts.
    for client in replicas:
        client.execute(f"DROP DATABASE IF EXISTS {config.database}")
    for client in replicas:
        for statement in statements:
            client.execute(statement)
        client.disconnect()


def _relation_bytes(table: str) -> int:
    """A table's bytes with its indexes and TOAST; a partitioned one's, every partition's."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_total_relation_size(r) + COALESCE((SELECT sum(pg_total_relation_size("
            "relid)) FROM pg_partition_tree(r) WHERE relid <> r), 0) FROM CAST(%s AS regclass) r",
            [table],
        )
        row = cursor.fetchone()
    return int(row[0]) if row else 0


def _wal() -> tuple[int, int]:
    """Bytes of WAL the server has written: by its insert position, and by pg_stat_wal."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint, "
            "(SELECT wal_bytes FROM pg_stat_wal)::bigint"
        )
        row = cursor.fetchone()
    return int(row[0]), int(row[1])


def _statements() -> dict[str, float] | None:
    """Milliseconds each statement of the bench database has taken to plan and run so
    far, by its text; None where the server does not load ``pg_stat_statements``."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            cursor.execute(
                "SELECT query, sum(total_exec_time + total_plan_time) FROM pg_stat_statements "
                "WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) "
                "GROUP BY query"
            )
            return {query: float(ms) for query, ms in cursor.fetchall()}
    except DatabaseError:
        return None


def _statements_spent(
    before: dict[str, float] | None, after: dict[str, float] | None, spans: int
) -> dict[str, Any]:
    if before is None or after is None or not spans:
        return {"pg_statement_us_per_span": None}
    spent = {query: ms - before.get(query, 0.0) for query, ms in after.items()}
    top = sorted(spent.items(), key=lambda item: -item[1])[:5]
    return {
        "pg_statement_us_per_span": round(sum(spent.values()) * 1000 / spans, 1),
        "pg_top_statements_us_per_span": {
            " ".join(query.split())[:80]: round(ms * 1000 / spans, 1) for query, ms in top
        },
    }


# A pg_waldump record line: its total length, and the database of its first block.
_RECORD = re.compile(rb"len \(rec/tot\): +\d+/ *(\d+),.*?blkref #0: rel \d+/(\d+)/")


class _WalCopy:
    """The server's WAL segments from a phase's start, copied as they fill, for pg_waldump
    to tell the bench database's records from the others' at the phase's end.

    Copied rather than read at the end: a server this busy recycles its segments at each
    checkpoint, within a minute or two. ``tick`` copies every segment finished since the
    last tick; a segment found gone makes the figure unknown rather than low.
    """

    def __init__(self) -> None:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT current_setting('data_directory'), "
                "current_setting('server_version_num')::int / 10000, "
                "pg_size_bytes(current_setting('wal_segment_size')), "
                "(SELECT oid FROM pg_database WHERE datname = current_database()), "
                "pg_walfile_name(pg_current_wal_flush_lsn()), pg_current_wal_flush_lsn()::text"
            )
            data_directory, major, segment_size, oid, segment, self.start = cursor.fetchone()
        self.source = Path(data_directory) / "pg_wal"
        self.waldump = Path(f"/usr/lib/postgresql/{major}/bin/pg_waldump")
        self.oid = str(oid).encode()
        self.per_id = 2**32 // int(segment_size)
        self.next = _segment_number(segment, self.per_id)
        self.timeline = segment[:8]
        self.copies = Path(tempfile.mkdtemp(prefix="bench-wal-"))
        self.lost = not (self.waldump.exists() and os.access(self.source, os.R_OK))

    def _name(self, number: int) -> str:
        return f"{self.timeline}{number // self.per_id:08X}{number % self.per_id:08X}"

    def tick(self, *, through: str | None = None) -> None:
        """Copy the segments before the one being written (through ``through``'s, when
        given: the last one, once the phase is over)."""
        if self.lost:
            return
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_walfile_name(%s::pg_lsn)", [through or _flushed()])
            last = _segment_number(cursor.fetchone()[0], self.per_id)
        if through is None:
            last -= 1  # still being written
        for number in range(self.next, last + 1):
            name = self._name(number)
            try:
                shutil.copyfile(self.source / name, self.copies / name)
            except OSError:
                self.lost = True
                return
        self.next = max(self.next, last + 1)

    def own_bytes(self) -> int | None:
        """The records since the start that touch the database (full-page images
        included; commit records, which name no relation, left out); None when a segment
        was recycled before it was copied, or there is no pg_waldump to read them."""
        end = _flushed()
        self.tick(through=end)
        try:
            if self.lost:
                return None
            if end == self.start:
                return 0
            command = [str(self.waldump), "-p", str(self.copies), "-s", self.start, "-e", end]
            own = 0
            out = subprocess.PIPE
            with subprocess.Popen(command, stdout=out, stderr=subprocess.DEVNULL) as dump:
                assert dump.stdout is not None
                for line in dump.stdout:
                    found = _RECORD.search(line)
                    if found and found.group(2) == self.oid:
                        own += int(found.group(1))
            # It stops with an error where a segment is missing or cut short.
            return None if dump.returncode != 0 else own
        finally:
            shutil.rmtree(self.copies, ignore_errors=True)


def _flushed() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_current_wal_flush_lsn()::text")
        return str(cursor.fetchone()[0])


def _segment_number(name: str, per_id: int) -> int:
    return int(name[8:16], 16) * per_id + int(name[16:24], 16)


def _pg_tables() -> dict[str, str]:
    from apps.analysis.models import StageSample
    from apps.ingest.models import Span, Trace

    return {
        "spans": Span._meta.db_table,
        "traces": Trace._meta.db_table,
        "samples": StageSample._meta.db_table,
    }


def _replicas(url: str) -> dict[str, tuple[str, int]]:
    """The cluster's replicas by name (``s1r2``: shard 1, replica 2), as (host, port)."""
    from apps.ingest.span_store.clickhouse_client import clickhouse, clickhouse_config

    config = clickhouse_config(url)
    with clickhouse(config) as client:
        rows = client.execute(
            "SELECT shard_num, replica_num, host_address, port FROM system.clusters "
            "WHERE cluster = %(cluster)s ORDER BY shard_num, replica_num",
            {"cluster": config.cluster},
        )
    return {
        f"s{shard}r{replica}": (host.decode() if isinstance(host, bytes) else host, port)
        for shard, replica, host, port in rows
    }


def _replicas_parts(url: str, *, sets: bool = False) -> dict[str, tuple[int, int, int, int]]:
    """Each replica's ``spans_local`` (or, with ``sets``, ``trace_sets_local``) active
    parts: rows, bytes on disk, uncompressed bytes, parts."""
    from apps.ingest.span_store.clickhouse_client import clickhouse, clickhouse_config
    from apps.ingest.span_store.clickhouse_schema import search_local_table, span_local_table

    config = clickhouse_config(url)
    local_table = search_local_table if sets else span_local_table
    database, table = local_table(config).split(".")
    sources = {"s1r1": "system.parts"}
    if config.cluster:
        user, password = config.user, config.password
        sources = {
            name: f"remote('{host}:{port}', system.parts, '{user}', '{password}')"
            for name, (host, port) in _replicas(url).items()
        }
    found = {}
    with clickhouse(config) as client:
        for name, source in sources.items():
            rows = client.execute(
                "SELECT sum(rows), sum(bytes_on_disk), sum(data_uncompressed_bytes), count() "
                f"FROM {source} WHERE database = '{database}' AND table = '{table}' AND active"
            )
            row_count, on_disk, uncompressed, parts = (int(v or 0) for v in rows[0])
            found[name] = (row_count, on_disk, uncompressed, parts)
    return found


def _per(value: float, spans: int) -> float | None:
    return round(value / spans, 1) if spans else None


class StorageMeter:
    """WAL and bytes stored over one phase: ``start`` at its beginning, ``figures`` once
    every trace is finalized."""

    def __init__(self, span_store_url: str) -> None:
        self.url = span_store_url

    def start(self) -> None:
        quiet_from = _wal()
        time.sleep(QUIET_S)
        self.wal_from = _wal()
        self.wal_copy = _WalCopy()
        self.quiet_wal_per_s = (self.wal_from[0] - quiet_from[0]) / QUIET_S
        self.started = time.monotonic()
        self.tables_from = {name: _relation_bytes(t) for name, t in _pg_tables().items()}
        self.parts_from = _replicas_parts(self.url) if self.url else {}
        self.sets_from = _replicas_parts(self.url, sets=True) if self.url else {}
        self.statements_from = _statements()

    def tick(self) -> None:
        """Every few seconds while the phase runs: keep the WAL it writes."""
        self.wal_copy.tick()

    def figures(self, spans: int) -> dict[str, Any]:
        wal_lsn, wal_stat = (to - since for to, since in zip(_wal(), self.wal_from, strict=True))
        own_wal = self.wal_copy.own_bytes()
        elapsed = time.monotonic() - self.started
        grown = {
            name: _relation_bytes(t) - self.tables_from[name] for name, t in _pg_tables().items()
        }
        figures: dict[str, Any] = {
            "spans_stored": spans,
            # Server-wide: an upper bound for this phase's WAL on a shared server.
            "pg_wal_bytes_per_span": _per(wal_lsn, spans),
            "pg_stat_wal_bytes_per_span": _per(wal_stat, spans),
            # The bench database's records alone (pg_waldump), None when unreadable.
            "pg_wal_own_db_bytes_per_span": None if own_wal is None else _per(own_wal, spans),
            "pg_wal_mb_per_s": round(wal_lsn / elapsed / 1e6, 2),
            "pg_wal_quiet_mb_per_s": round(self.quiet_wal_per_s / 1e6, 2),
            **{f"pg_{name}_bytes_per_span": _per(size, spans) for name, size in grown.items()},
            "pg_bytes_per_span": _per(sum(grown.values()), spans),
            **_statements_spent(self.statements_from, _statements(), spans),
        }
        if self.url:
            figures |= self._clickhouse(spans)
        return figures

    def _clickhouse(self, spans: int) -> dict[str, Any]:
        replicas: dict[str, Any] = {}
        on_disk = 0
        for name, (rows, disk, raw, parts) in _replicas_parts(self.url).items():
            rows0, disk0, raw0, _ = self.parts_from.get(name, (0, 0, 0, 0))
            rows, disk, raw = rows - rows0, disk - disk0, raw - raw0
            on_disk += disk
            replicas[name] = {
                "spans": rows,
                "bytes_on_disk_per_span": _per(disk, rows),
                "uncompressed_bytes_per_span": _per(raw, rows),
                "active_parts": parts,
            }
        sets_on_disk = sum(
            disk - self.sets_from.get(name, (0, 0, 0, 0))[1]
            for name, (_, disk, _, _) in _replicas_parts(self.url, sets=True).items()
        )
        return {
            # Every replica's bytes, per span stored once: what the cluster keeps per span.
            "ch_bytes_on_disk_per_span_all_replicas": _per(on_disk, spans),
            # The analyzed traces' search sets beside them, the same way.
            "ch_sets_bytes_on_disk_per_span_all_replicas": _per(sets_on_disk, spans),
            "ch_replicas": replicas,
        }
