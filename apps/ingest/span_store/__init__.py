"""Where spans are kept: PostgreSQL's day partitions, or a ClickHouse cluster.

``span_store()`` is the configured store (``SPAN_STORE_URL``), one per process.
"""

from functools import cache

from django.conf import settings

from apps.ingest.span_store.base import (
    Candidate,
    ContentRow,
    ProjectedRead,
    ProjectedRow,
    SearchOrder,
    SearchSet,
    SpanStore,
    SpanStoreUnavailable,
    StoredRow,
    WriteResult,
)

__all__ = [
    "Candidate",
    "ContentRow",
    "ProjectedRead",
    "ProjectedRow",
    "SearchOrder",
    "SearchSet",
    "SpanStore",
    "SpanStoreUnavailable",
    "StoredRow",
    "WriteResult",
    "span_store",
]


def span_store() -> SpanStore:
    """The store ``SPAN_STORE_URL`` names (PostgreSQL when it names none)."""
    return _store_for(settings.SPAN_STORE_URL)


@cache
def _store_for(url: str) -> SpanStore:
    if url:
        from apps.ingest.span_store.clickhouse import ClickHouseSpanStore
        from apps.ingest.span_store.clickhouse_client import clickhouse_config

        return ClickHouseSpanStore(clickhouse_config(url))
    from apps.ingest.span_store.postgres import PostgresSpanStore

    return PostgresSpanStore()
