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

import logging
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from apps.analysis.models import DirtyBucket
from apps.core.isolated_pass import IsolatedPass, PassOutcome, pass_run
from apps.core.isolation import failure_reason
from apps.core.models import QuarantineKind
from apps.core.quarantine import quarantine_record
from apps.core.time import RESOLUTIONS, align_down, to_datetime, to_seconds
from apps.rollups.models import LlmBucket, RollupBucket
from apps.rollups.services import bucket_compute as rollup_compute
from apps.rollups.services.bucket_compute import PipelineInfo
from apps.rollups.services.retention import PARENT, bucket_source

logger = logging.getLogger(__name__)

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

    def add(self, other: "RollupResult") -> None:
        self.claimed.update(other.claimed)
        for resolution, pipelines in other.pipelines.items():
            self.pipelines.setdefault(resolution, set()).update(pipelines)
        self.rows_written += other.rows_written
        self.rows_deleted += other.rows_deleted


def rollup_buckets_release(dirty_ids: list[int]) -> int:
    """Put quarantined buckets back into the rollup passes."""
    return DirtyBucket.objects.filter(pk__in=dirty_ids).update(quarantined_at=None)


def rollups_process_dirty(
    *, limit: int = 500, now: datetime | None = None, settle_s: float = 0.0
) -> RollupResult:
    """Recompute up to ``limit`` dirty buckets of each resolution, finest first.

    With ``settle_s``, a finest bucket waits until it has been dirty that long: while
    its traces are being analyzed, pass after pass, it is rewritten once per period
    instead of once per pass, each time reading all its samples again. Coarser buckets
    are merged from their children's rows, which costs little, and are never held.
    """
    now = now or timezone.now()
    result = RollupResult()
    for resolution in RESOLUTIONS:
        settled_before = None
        if settle_s > 0 and resolution == RESOLUTIONS[0]:
            settled_before = now - timedelta(seconds=settle_s)
        bucket_pass = ResolutionPass(
            resolution, limit=limit, now=now, settled_before=settled_before
        )
        result.add(bucket_pass.result(pass_run(bucket_pass)))
    return result


Claimed = tuple[int, int, datetime]  # dirty row id, pipeline id, bucket start


@dataclass
class _Rewritten:
    """What rewriting some claimed buckets did, kept apart until it commits."""

    rows: list[Claimed]
    starts: dict[int, list[int]]  # pipeline id -> bucket starts rewritten
    written: int = 0
    deleted: int = 0


class ResolutionPass(IsolatedPass[Claimed, Claimed, _Rewritten]):
    """The dirty buckets of one resolution, the oldest first, rewritten whole.

    Without a crash guard: a bucket's work is bounded SQL over bounded rows, and the
    claim's own transaction would cost every pass of every resolution.
    """

    kind = QuarantineKind.ROLLUP_BUCKET
    crash_guard = False

    def __init__(
        self, resolution: int, *, limit: int, now: datetime, settled_before: datetime | None = None
    ) -> None:
        self.resolution = resolution
        self.max_items = limit
        self.now = now
        self.settled_before = settled_before

    def waiting(self) -> QuerySet[Any]:
        dirty = DirtyBucket.objects.filter(resolution=self.resolution, quarantined_at__isnull=True)
        if self.settled_before is not None:
            dirty = dirty.filter(dirty_since__lte=self.settled_before)
        return dirty.order_by("bucket_start", "id").values_list("id", "pipeline_id", "bucket_start")

    def begin(self, items: list[Claimed]) -> list[Claimed]:
        self.pipelines = rollup_compute.pipelines_info({pipeline_id for _, pipeline_id, _ in items})
        return items

    def work(self, item: Claimed) -> Claimed:
        return item  # the rewrite is SQL, done for the group at once

    def write(self, group: Sequence[Claimed]) -> _Rewritten:
        starts: dict[int, set[int]] = defaultdict(set)
        for _, pipeline_id, start in group:
            starts[pipeline_id].add(to_seconds(start))
        done = _Rewritten(rows=list(group), starts={})
        for pipeline_id in sorted(starts):
            done.starts[pipeline_id] = _rewrite(
                pipeline_id, self.pipelines.get(pipeline_id), self.resolution,
                sorted(starts[pipeline_id]), now=self.now, done=done,
            )  # fmt: skip
        return done

    def item_of(self, done: Claimed) -> Claimed:
        return done

    def quarantine(self, item: Claimed, reason: BaseException) -> None:
        dirty_id, pipeline_id, _ = item
        why = failure_reason(reason)
        logger.warning("rollup bucket %s quarantined: %s", item, why)
        DirtyBucket.objects.filter(pk=dirty_id).update(quarantined_at=self.now)
        info = self.pipelines.get(pipeline_id)
        quarantine_record(
            kind=QuarantineKind.ROLLUP_BUCKET,
            item_id=dirty_id,
            team_id=info.team_id if info else None,
            reason=why,
        )

    def finish(self, outcome: PassOutcome[Claimed, _Rewritten]) -> None:
        """The claimed rows go, and the parents of the rewritten buckets are marked."""
        parents: set[tuple[int, int]] = set()
        parent = PARENT.get(self.resolution)
        for done in outcome.written:
            DirtyBucket.objects.filter(pk__in=[row[0] for row in done.rows]).delete()
            if parent is not None:
                for pipeline_id, rewritten in done.starts.items():
                    parents |= {(pipeline_id, align_down(start, parent)) for start in rewritten}
        if parents and parent is not None:
            _mark(parents, parent)

    def result(self, outcome: PassOutcome[Claimed, _Rewritten]) -> RollupResult:
        result = RollupResult()
        if outcome.locked:
            result.claimed[self.resolution] = outcome.locked
        for done in outcome.written:
            result.rows_written += done.written
            result.rows_deleted += done.deleted
            for pipeline_id, rewritten in done.starts.items():
                if rewritten:
                    result.pipelines.setdefault(self.resolution, set()).add(pipeline_id)
        return result


def _rewrite(
    pipeline_id: int,
    pipeline: PipelineInfo | None,
    resolution: int,
    starts: list[int],
    *,
    now: datetime,
    done: _Rewritten,
) -> list[int]:
    """Replace the rows of one pipeline's claimed buckets; the starts rewritten."""
    plan: dict[str, list[int]] = defaultdict(list)
    for start in starts:
        # A deleted pipeline's buckets are emptied all the way up.
        source = (
            "expired" if pipeline is None else bucket_source(resolution, to_datetime(start), now)
        )
        plan[source].append(start)
    rewritten = sorted(plan["samples"] + plan["children"] + plan["expired"])
    buckets = [to_datetime(start) for start in rewritten]
    for model in (RollupBucket, LlmBucket):
        done.deleted += model.objects.filter(
            pipeline_id=pipeline_id, resolution=resolution, bucket_start__in=buckets
        ).delete()[0]
    if pipeline is not None:
        rows: list[RollupBucket] = []
        llm: list[LlmBucket] = []
        if plan["samples"]:
            rows, llm = rollup_compute.rows_from_samples(pipeline, resolution, plan["samples"])
        if plan["children"]:
            rows += rollup_compute.rows_from_children(pipeline, resolution, plan["children"])
            llm += rollup_compute.llm_rows_from_children(pipeline, resolution, plan["children"])
        RollupBucket.objects.bulk_create(rows, batch_size=1000)
        LlmBucket.objects.bulk_create(llm, batch_size=1000)
        done.written += len(rows) + len(llm)
    return rewritten


def _mark(buckets: set[tuple[int, int]], resolution: int) -> None:
    # Sorted, so that concurrent runs upsert in one order and never deadlock.
    DirtyBucket.objects.bulk_create(
        [
            DirtyBucket(
                pipeline_id=pipeline_id, resolution=resolution, bucket_start=to_datetime(start)
            )
            for pipeline_id, start in sorted(buckets)
        ],
        update_conflicts=True,
        unique_fields=DIRTY_KEY,
        update_fields=["marked_at"],
    )
