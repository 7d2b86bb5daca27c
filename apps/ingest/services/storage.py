"""Retention: spans for SPAN_RETENTION_DAYS, traces and samples for SAMPLE_RETENTION_DAYS."""

from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from apps.core.partitions import (
    partitions_drop_before,
    partitions_ensure,
)
from apps.ingest.models import Trace

PARTITIONED = {"ingest_span": "SPAN_RETENTION_DAYS", "rollups_stagesample": "SAMPLE_RETENTION_DAYS"}
DAYS_AHEAD = 2


@dataclass
class StorageResult:
    created: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    deleted_rows: int = 0


def storage_maintain() -> StorageResult:
    """Create tomorrow's partitions and drop expired ones."""
    today = timezone.now().date()
    result = StorageResult()
    for table, setting in PARTITIONED.items():
        cutoff = today - timedelta(days=getattr(settings, setting))
        result.created += partitions_ensure(
            table, first=today - timedelta(days=1), last=today + timedelta(days=DAYS_AHEAD)
        )
        result.dropped += partitions_drop_before(table, cutoff=cutoff)
    trace_cutoff = timezone.now() - timedelta(days=settings.SAMPLE_RETENTION_DAYS)
    result.deleted_rows += Trace.objects.filter(last_span_at__lt=trace_cutoff).delete()[0]
    return result
