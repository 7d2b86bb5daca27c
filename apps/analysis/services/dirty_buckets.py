"""Marking rollup buckets whose samples changed."""

from collections.abc import Iterable

from apps.analysis.models import DirtyBucket
from apps.core.time import FINEST_RESOLUTION, bucket_start


def dirty_buckets_mark(
    pipeline_starts: Iterable[tuple[int | None, int | None]], resolution: int = FINEST_RESOLUTION
) -> int:
    """Mark the finest buckets holding these (pipeline id, trace start ns) pairs dirty."""
    rows = {
        (pipeline_id, bucket_start(start_ns, resolution))
        for pipeline_id, start_ns in pipeline_starts
        if pipeline_id is not None and start_ns is not None
    }
    DirtyBucket.objects.bulk_create(
        [
            DirtyBucket(pipeline_id=pipeline_id, resolution=resolution, bucket_start=start)
            for pipeline_id, start in sorted(rows)
        ],
        # Touch rows that exist instead of ignoring them: a rollup run holding the row
        # then waits for this transaction, and its delete no longer drops the mark.
        update_conflicts=True,
        unique_fields=["pipeline_id", "resolution", "bucket_start"],
        update_fields=["marked_at"],
    )
    return len(rows)
