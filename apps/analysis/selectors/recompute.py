"""Recomputes as pages and the API show them, and which figures predate a rule change."""

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Min

from apps.analysis.models import DirtyBucket, Recompute, RecomputeStatus
from apps.core.time import NS_PER_S, datetime_to_ns
from apps.ingest.models import Trace
from apps.pipelines.models import Pipeline

# Rollup buckets still to rewrite are counted up to this many; past it "more than".
PENDING_SHOWN = 10_000


@dataclass(frozen=True)
class RecomputeProgress:
    run: Recompute
    # The pipeline's rollup buckets still to be rewritten, at most PENDING_SHOWN: once
    # the samples are done, the figures change as the rollup passes reach these.
    rollups_pending: int

    @property
    def percent(self) -> int:
        """Share of the window's traces handled; a finished run is whole."""
        if self.run.status == RecomputeStatus.FINISHED or not self.run.total:
            return 100 if self.run.status == RecomputeStatus.FINISHED else 0
        return min(100, self.run.handled * 100 // self.run.total)

    @property
    def window_cut(self) -> bool:
        """The window starts later than asked: older spans are no longer stored."""
        asked = self.run.window_end.timestamp() - self.run.hours * 3600
        return self.run.window_start.timestamp() > asked + 1

    @property
    def rollups_more(self) -> bool:
        return self.rollups_pending >= PENDING_SHOWN


def recompute_latest(*, pipeline: Pipeline) -> Recompute | None:
    return (
        Recompute.objects.filter(pipeline=pipeline)
        .select_related("pipeline__team", "requested_by")
        .order_by("-created_at", "-pk")
        .first()
    )


def recompute_progress(*, run: Recompute) -> RecomputeProgress:
    """The run and its pipeline's rollup buckets still to rewrite: all of them while it
    runs; once it ended, those marked before it ended (fresh traffic marks more)."""
    pending = DirtyBucket.objects.filter(pipeline_id=run.pipeline_id, quarantined_at__isnull=True)
    if run.finished_at is not None:
        pending = pending.filter(marked_at__lte=run.finished_at)
    return RecomputeProgress(run=run, rollups_pending=pending[:PENDING_SHOWN].count())


def earlier_rules_until(*, pipeline: Pipeline) -> datetime | None:
    """Traces of the pipeline that started before this were analysed with earlier rules.

    The last rule change, or the oldest start recomputed since by a finished recompute
    (each covers its window up to its request, which came after the change); None
    when no change is recorded.
    """
    changed = pipeline.rules_changed_at
    if changed is None:
        return None
    recomputed_from = Recompute.objects.filter(
        pipeline=pipeline, status=RecomputeStatus.FINISHED, created_at__gte=changed
    ).aggregate(start=Min("window_start"))["start"]
    return min(changed, recomputed_from) if recomputed_from else changed


def figures_predate_rules(*, pipeline: Pipeline, start: int, end: int) -> datetime | None:
    """The time before which the range ``[start, end)`` (epoch seconds) holds traces
    analysed with earlier rules, or None when it holds none.

    A trace counts when it was analysed before the change, whatever its start: one
    that arrived after the change, or was recomputed, is the current rules'. The scan
    stops at the first such trace; the ones it passes on the way started before the
    change and were analysed after it, which are few but for backfilled traffic.
    """
    until = earlier_rules_until(pipeline=pipeline)
    if until is None or start * NS_PER_S >= datetime_to_ns(until):
        return None
    older = Trace.objects.filter(
        team_id=pipeline.team_id,
        pipeline=pipeline,
        start_ns__gte=start * NS_PER_S,
        start_ns__lt=min(end * NS_PER_S, datetime_to_ns(until)),
        finalized_at__lt=pipeline.rules_changed_at,
    )
    return until if older.exists() else None
