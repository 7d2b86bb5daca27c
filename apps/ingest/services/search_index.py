"""Where the traces' search sets are looked up: the trace rows' GIN index, or the span
store.

With spans in PostgreSQL, a GIN index on ``Trace.search_hashes`` finds the traces whose
set holds what the trace list's filters ask for. A store that keeps the sets beside the
spans (ClickHouse) answers that itself, and the index would only cost PostgreSQL: some
forty entries a trace on every analysis, its largest write once spans are elsewhere.
The trace rows keep their sets either way, for the exact check of each candidate.

``manage.py span_store_migrate`` brings the index in line with the store, and can copy
the sets of traces analyzed before the switch into a store that keeps them.
"""

from collections.abc import Callable

from django.db import connection

from apps.ingest.models import Trace
from apps.ingest.span_store import SearchSet, SpanStore

INDEX = "trace_search_hashes"
COPY_CHUNK = 5000


def search_index_sync(store: SpanStore) -> str:
    """Create the GIN index (or build it again if a build was interrupted) when the
    store keeps no search sets, drop it when it does; say what was done. Concurrently
    outside a transaction (as the command runs): ingestion and analysis go on meanwhile."""
    table = Trace._meta.db_table
    concurrently = "" if connection.in_atomic_block else " CONCURRENTLY"
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid = to_regclass(%s)", [INDEX]
        )
        row = cursor.fetchone()
        exists, valid = row is not None, bool(row and row[0])
        if store.keeps_search_sets:
            if not exists:
                return f"no {INDEX} index: the {store.name} store keeps the search sets"
            cursor.execute(f"DROP INDEX{concurrently} IF EXISTS {INDEX}")
            return f"dropped the {INDEX} index: the {store.name} store keeps the search sets"
        if exists and valid:
            return f"the {INDEX} index is in place"
        if exists:
            cursor.execute(f"DROP INDEX{concurrently} IF EXISTS {INDEX}")
        cursor.execute(
            f"CREATE INDEX{concurrently} {INDEX} ON {table} USING gin (search_hashes) "
            "WHERE start_ns IS NOT NULL"
        )
        return f"built the {INDEX} index"


def search_sets_copy(store: SpanStore, progress: Callable[[int], None] | None = None) -> int:
    """Copy the search sets of every analyzed trace into the store, in chunks by row
    id; return how many traces. For traces analyzed before the store kept the sets
    (new analyses write them there): the copy may run again, a set kept twice still
    names its trace once."""
    copied = 0
    last = 0
    while True:
        chunk = list(
            Trace.objects.filter(
                pk__gt=last,
                start_ns__isnull=False,
                end_ns__isnull=False,
                search_hashes__isnull=False,
            )
            .order_by("pk")
            .values_list("pk", "team_id", "start_ns", "end_ns", "search_hashes")[:COPY_CHUNK]
        )
        if not chunk:
            return copied
        store.search_sets_write(
            [SearchSet(team, pk, start, end - start, hashes)
             for pk, team, start, end, hashes in chunk
             if start is not None and end is not None and hashes]
        )  # fmt: skip
        copied += len(chunk)
        last = chunk[-1][0]
        if progress is not None:
            progress(copied)
