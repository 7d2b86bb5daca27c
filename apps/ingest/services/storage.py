"""Retention: spans for SPAN_RETENTION_DAYS, traces and samples for SAMPLE_RETENTION_DAYS."""

from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from apps.core.partitions import (
    day_start_ns,
    is_postgres,
    partitions_drop_before,
    partitions_ensure,
)
from apps.ingest.models import Span, Trace
from apps.rollups.models import StageSample

PARTITIONED = {"ingest_span": "SPAN_RETENTION_DAYS", "rollups_stagesample": "SAMPLE_RETENTION_DAYS"}
DAYS_AHEAD = 2


@dataclass
class StorageResult:
    created: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    deleted_rows: int = 0


def storage_maintain() -> StorageResult:
    """Create tomorrow's partitions, drop expired ones (or delete rows off PostgreSQL)."""
    today = timezone.now().date()
    result = StorageResult()
    for table, setting in PARTITIONED.items():
        cutoff = today - timedelta(days=getattr(settings, setting))
        if is_postgres():
            result.created += partitions_ensure(
                table, first=today - timedelta(days=1), last=today + timedelta(days=DAYS_AHEAD)
            )
            result.dropped += partitions_drop_before(table, cutoff=cutoff)
    if not is_postgres():
        span_cutoff = day_start_ns(today - timedelta(days=settings.SPAN_RETENTION_DAYS))
        sample_cutoff = day_start_ns(today - timedelta(days=settings.SAMPLE_RETENTION_DAYS))
        result.deleted_rows += Span.objects.filter(start_ns__lt=span_cutoff).delete()[0]
        result.deleted_rows += StageSample.objects.filter(start_ns__lt=sample_cutoff).delete()[0]
    trace_cutoff = timezone.now() - timedelta(days=settings.SAMPLE_RETENTION_DAYS)
    result.deleted_rows += Trace.objects.filter(last_span_at__lt=trace_cutoff).delete()[0]
    return result
