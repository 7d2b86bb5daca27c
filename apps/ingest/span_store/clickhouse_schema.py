"""The ClickHouse span store's tables, created by ``manage.py span_store_migrate``.

Written for what both an old server (Debian's 18.16) and a current one accept: Int64
nanosecond times, ``FixedString`` ids, attributes and events as the drain's JSON text
in ``String`` columns.

With a cluster, each shard's replicas hold ``spans_local``, a
``ReplicatedReplacingMergeTree`` partitioned by day and ordered by (team, trace, span,
start), and ``spans`` is a ``Distributed`` table over them sharded by
``cityHash64(team_id, trace_id)``: a trace lives on one shard, a big team spreads over
all. The start closes the key as it does PostgreSQL's: two copies of a span that
disagree on their start are both kept, and readers choose as analysis does.
``span_batches`` records the raw batches whose spans an insert carried, so a drain
redone after a failure finds what it already wrote. ``trace_sets`` holds the analyzed
traces' search sets, which the trace list's attribute and stage filters look up.

Every statement is idempotent (``IF NOT EXISTS``, or ``IF EXISTS`` for the first
schema's table it drops): the command can run again at any time, and on each
deployment.
"""

from collections.abc import Iterator

from apps.ingest.span_store.clickhouse_client import ClickHouseConfig

# Granules of 2048 rows: a drain looks up the stored spans of the traces it touches that
# already had some (a batch sent twice, spans of one trace in several batches), one
# granule a trace, so smaller granules keep that read small.
INDEX_GRANULARITY = 2048

SPAN_COLUMNS = (
    ("day", "Date"),
    ("team_id", "Int64"),
    ("trace_id", "FixedString(16)"),
    ("span_id", "FixedString(8)"),
    ("start_ns", "Int64"),
    ("end_ns", "Int64"),
    # A root has no parent: has_parent 0 and eight zero bytes.
    ("has_parent", "UInt8"),
    ("parent_span_id", "FixedString(8)"),
    ("kind", "UInt8"),
    ("status", "UInt8"),
    ("name", "String"),
    ("service", "String"),
    ("status_message", "String"),
    ("scope_name", "String"),
    ("attributes", "String"),
    ("events", "String"),
    ("received_ns", "Int64"),
    ("batch_id", "Int64"),
)
BATCH_COLUMNS = (("day", "Date"), ("batch_id", "Int64"))
SPAN_KEY = "team_id, trace_id, span_id, start_ns"
# The traces' search sets (``apps.analysis.trace_search``): a row per trace and revision,
# the low 32 bits of its elements' hashes in one array, the day being the root's. Some
# sixty elements a trace: a row each would make the store's rows nine a span instead of
# one. The trace list scans a team's rows in its time range for the elements, as
# ClickHouse scans columns, and checks each trace it names on its row (which holds the
# full hashes), so 32 bits are enough to name few traces in vain and halve the scan.
# Every revision's keys stay in the sorting key, and so does a hash of its full set, so
# no merge folds one revision into another; a pass redone sends identical rows, which
# merge.
SEARCH_COLUMNS = (
    ("day", "Date"),
    ("team_id", "Int64"),
    ("start_ns", "Int64"),
    ("trace_pk", "Int64"),
    ("duration_ns", "Int64"),
    ("set_hash", "Int64"),
    ("elements", "Array(UInt32)"),
)
SEARCH_KEY = "team_id, start_ns, trace_pk, duration_ns, set_hash"
# The first schema's table, a row per element; its sets are copied again by
# ``span_store_migrate --copy-search-sets``.
RETIRED_TABLES = ("trace_search",)


def span_table(config: ClickHouseConfig) -> str:
    """Where spans are inserted and read: the Distributed table, or the one table."""
    return f"{config.database}.spans"


def span_local_table(config: ClickHouseConfig) -> str:
    """Where a day's spans are dropped: each replica's table, or the one table."""
    return f"{config.database}.spans_local" if config.cluster else span_table(config)


def batch_table(config: ClickHouseConfig) -> str:
    return f"{config.database}.span_batches"


def batch_local_table(config: ClickHouseConfig) -> str:
    return f"{config.database}.span_batches_local" if config.cluster else batch_table(config)


def search_table(config: ClickHouseConfig) -> str:
    return f"{config.database}.trace_sets"


def search_local_table(config: ClickHouseConfig) -> str:
    return f"{config.database}.trace_sets_local" if config.cluster else search_table(config)


def _columns(columns: tuple[tuple[str, str], ...]) -> str:
    return ", ".join(f"{name} {sql_type}" for name, sql_type in columns)


def _merge_tree(config: ClickHouseConfig, local: str) -> str:
    if not config.cluster:
        return "ReplacingMergeTree()"
    # {shard} and {replica} are each server's macros.
    path = f"/clickhouse/tables/{{shard}}/{config.database}/{local}"
    return f"ReplicatedReplacingMergeTree('{path}', '{{replica}}')"


def schema_statements(config: ClickHouseConfig) -> Iterator[str]:
    """The statements that bring a store's schema up to date, in order."""
    db, on_cluster = config.database, config.on_cluster
    yield f"CREATE DATABASE IF NOT EXISTS {db}{on_cluster}"
    tables = (
        ("spans", SPAN_COLUMNS, SPAN_KEY, "cityHash64(team_id, trace_id)", INDEX_GRANULARITY),
        ("span_batches", BATCH_COLUMNS, "batch_id", "intHash64(batch_id)", 8192),
        ("trace_sets", SEARCH_COLUMNS, SEARCH_KEY, "intHash64(trace_pk)", 8192),
    )
    for name, columns, key, sharding, granularity in tables:
        local = f"{name}_local" if config.cluster else name
        yield (
            f"CREATE TABLE IF NOT EXISTS {db}.{local}{on_cluster} ({_columns(columns)}) "
            f"ENGINE = {_merge_tree(config, local)} PARTITION BY day ORDER BY ({key}) "
            f"SETTINGS index_granularity = {granularity}"
        )
        if config.cluster:
            yield (
                f"CREATE TABLE IF NOT EXISTS {db}.{name}{on_cluster} AS {db}.{local} "
                f"ENGINE = Distributed({config.cluster}, {db}, {local}, {sharding})"
            )
    for name in RETIRED_TABLES:
        yield f"DROP TABLE IF EXISTS {db}.{name}{on_cluster}"
        if config.cluster:
            yield f"DROP TABLE IF EXISTS {db}.{name}_local{on_cluster}"
