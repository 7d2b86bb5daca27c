"""Recompute dirty rollup buckets, finest resolution first.

Restartability. The classic rollup job keeps a watermark, the time up to which
its input has been rolled up, and advances it in the transaction that writes the
output, so a crash redoes exactly the unfinished part. Late data breaks a single
position: a trace analyzed again can change any old bucket. So the watermark is a
set instead, one DirtyBucket row per bucket still to be redone: trace analysis adds
rows in the transaction that changes samples, and a run claims rows, rewrites
their buckets (old rows deleted, new ones computed from scratch, never added to),
marks each parent bucket dirty and deletes the claimed rows, all in one
transaction. A crash anywhere rolls everything back, leaving the rows for the next
run, which redoes the half-written buckets whole.

Each resolution is its own transaction (its own job, with its own set of rows),
finest first, so one call carries a change from 10 s up to the day bucket. A
transaction locks buckets of one resolution and marks only the next, so two
workers never wait on each other in a cycle. Claims use ``FOR UPDATE SKIP
LOCKED``: concurrent runs share the rows and never claim the same bucket. Parents
are marked with an upsert that touches ``marked_at``: when the parent row is
claimed by a run still reading the children, the upsert waits for that run and
leaves a new row behind, so the parent is redone with the new children; an insert
that ignored the conflict would be lost when that run deletes its claimed row.
"""

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from django.db import connection, transaction
from django.utils import timezone

from apps.core.transactions import commit_without_waiting
from apps.rollups.models import RESOLUTIONS, DirtyBucket, RollupBucket
from apps.rollups.services import rollup_compute
from apps.rollups.services.rollup_compute import PipelineInfo, as_datetime
from apps.rollups.services.rollup_retention import PARENT, bucket_source

DIRTY_KEY = ["pipeline_id", "resolution", "bucket_start"]


@dataclass
class RollupResult:
    claimed: dict[int, int] = field(default_factory=dict)
    # By resolution, the pipelines whose buckets were rewritten: whose budgets to check.
    pipelines: dict[int, set[int]] = field(default_factory=dict)
    rows_written: int = 0
    rows_deleted: int = 0

    @property
    def buckets(self) -> int:
        return sum(self.claimed.values())


def rollups_process_dirty(*, limit: int = 500, now: datetime | None = None) -> RollupResult:
    """Recompute up to ``limit`` dirty buckets of each resolution, finest first."""
    now = now or timezone.now()
    result = RollupResult()
    for resolution in RESOLUTIONS:
        with transaction.atomic():
            commit_without_waiting()  # a lost commit leaves its dirty rows: redone
            _process_resolution(resolution, limit=limit, now=now, result=result)
    return result


def _claim(resolution: int, limit: int) -> list[tuple[int, int, datetime]]:
    dirty = DirtyBucket.objects.filter(resolution=resolution).order_by("bucket_start", "id")
    if connection.features.has_select_for_update_skip_locked:
        dirty = dirty.select_for_update(skip_locked=True)
    return list(dirty.values_list("id", "pipeline_id", "bucket_start")[:limit])


def _process_resolution(
    resolution: int, *, limit: int, now: datetime, result: RollupResult
) -> None:
    claimed = _claim(resolution, limit)
    if not claimed:
        return
    result.claimed[resolution] = len(claimed)
    starts: dict[int, set[int]] = defaultdict(set)
    for _, pipeline_id, start in claimed:
        starts[pipeline_id].add(int(start.timestamp()))
    pipelines = rollup_compute.pipelines_info(set(starts))
    parents: set[tuple[int, int]] = set()
    for pipeline_id in sorted(starts):
        rewritten = _rewrite(
            pipeline_id, pipelines.get(pipeline_id), resolution, sorted(starts[pipeline_id]),
            now=now, result=result,
        )  # fmt: skip
        if rewritten:
            result.pipelines.setdefault(resolution, set()).add(pipeline_id)
        if resolution in PARENT:
            parent = PARENT[resolution]
            parents |= {(pipeline_id, start - start % parent) for start in rewritten}
    if parents:
        _mark(parents, PARENT[resolution])
    DirtyBucket.objects.filter(pk__in=[row[0] for row in claimed]).delete()


def _rewrite(
    pipeline_id: int,
    pipeline: PipelineInfo | None,
    resolution: int,
    starts: list[int],
    *,
    now: datetime,
    result: RollupResult,
) -> list[int]:
    """Replace the rows of one pipeline's claimed buckets; the starts rewritten."""
    plan: dict[str, list[int]] = defaultdict(list)
    for start in starts:
        # A deleted pipeline's buckets are emptied all the way up.
        source = (
            "expired" if pipeline is None else bucket_source(resolution, as_datetime(start), now)
        )
        plan[source].append(start)
    rewritten = sorted(plan["samples"] + plan["children"] + plan["expired"])
    result.rows_deleted += RollupBucket.objects.filter(
        pipeline_id=pipeline_id,
        resolution=resolution,
        bucket_start__in=[as_datetime(start) for start in rewritten],
    ).delete()[0]
    if pipeline is not None:
        rows = []
        if plan["samples"]:
            rows += rollup_compute.rows_from_samples(pipeline, resolution, plan["samples"])
        if plan["children"]:
            rows += rollup_compute.rows_from_children(pipeline, resolution, plan["children"])
        RollupBucket.objects.bulk_create(rows, batch_size=1000)
        result.rows_written += len(rows)
    return rewritten


def _mark(buckets: set[tuple[int, int]], resolution: int) -> None:
    # Sorted, so that concurrent runs upsert in one order and never deadlock.
    DirtyBucket.objects.bulk_create(
        [
            DirtyBucket(
                pipeline_id=pipeline_id, resolution=resolution, bucket_start=as_datetime(start)
            )
            for pipeline_id, start in sorted(buckets)
        ],
        update_conflicts=True,
        unique_fields=DIRTY_KEY,
        update_fields=["marked_at"],
    )
