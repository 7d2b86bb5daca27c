"""Retention: the span store's days, partitions of the registered tables, and trace rows
for SAMPLE_RETENTION_DAYS."""

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.utils import timezone

from apps.core.partitions import DAYS_AHEAD, partitions_maintain
from apps.ingest.models import Trace
from apps.ingest.span_store import span_store


@dataclass
class StorageResult:
    created: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    deleted_rows: int = 0


def storage_maintain() -> StorageResult:
    """Create the coming days' partitions, drop expired ones and delete expired traces."""
    now = timezone.now()
    today = now.date()
    store = span_store()
    created = store.days_prepare(today - timedelta(days=1), today + timedelta(days=DAYS_AHEAD))
    dropped = store.days_drop(today - timedelta(days=settings.SPAN_RETENTION_DAYS))
    tables_created, tables_dropped = partitions_maintain(today)
    result = StorageResult(created=created + tables_created, dropped=dropped + tables_dropped)
    trace_cutoff = now - timedelta(days=settings.SAMPLE_RETENTION_DAYS)
    result.deleted_rows += Trace.objects.filter(last_span_at__lt=trace_cutoff).delete()[0]
    return result


def spans_kept_since(now: datetime) -> datetime:
    """Start of the oldest day whose spans survive the next storage maintenance.

    Maintenance drops the span partitions of the days before ``today -
    SPAN_RETENTION_DAYS``; one day more covers a run after midnight. Traces that
    started earlier may have lost their spans: nothing can be derived from them again.
    """
    day = (now.astimezone(UTC) - timedelta(days=settings.SPAN_RETENTION_DAYS - 1)).date()
    return datetime(day.year, day.month, day.day, tzinfo=UTC)
