"""The levers' effect measured: the holdout (requests the run-time client ran with every
lever off, ``docs/runtime.md``) beside all of the range's requests. The ledger's saved
time and rescues are the clients' estimates; this is what the control group shows."""

from dataclasses import dataclass

from apps.analysis.selectors.holdout import holdout_requests, holdout_stage_times
from apps.core.time import to_datetime
from apps.pipelines.models import Pipeline, Stage
from apps.rollups.selectors.objectives import good_total
from apps.rollups.selectors.percentiles import Distribution

NS = 1_000_000_000


@dataclass(frozen=True)
class Cohort:
    count: int
    p95_ms: float | None
    p99_ms: float | None
    within_share: float | None = None  # percent within the deadline; None when unknown


@dataclass(frozen=True)
class HoldoutComparison:
    holdout: Cohort
    everyone: Cohort
    deadline_ms: int | None

    @property
    def share_of_requests(self) -> float | None:
        if not self.everyone.count:
            return None
        return min(100.0 * self.holdout.count / self.everyone.count, 100.0)


def _everyone(distribution: Distribution, within_share: float | None = None) -> Cohort:
    return Cohort(
        count=distribution.count,
        p95_ms=distribution.percentile("p95"),
        p99_ms=distribution.percentile("p99"),
        within_share=within_share,
    )


def _within_share(pipeline: Pipeline, start: int, end: int) -> float | None:
    """All requests' share within the deadline, where the rollups count it: their good
    counts are against the objective's threshold, which is then the deadline."""
    if pipeline.objective_threshold_ms is None:
        return None
    if pipeline.objective_threshold_ms != pipeline.deadline_ms:
        return None
    good, total = good_total(
        pipeline_id=pipeline.pk, start=to_datetime(start), end=to_datetime(end)
    )
    return 100.0 * good / total if total else None


def pipeline_holdout_comparison(
    *, pipeline: Pipeline, start: int, end: int, e2e: Distribution
) -> HoldoutComparison | None:
    """End to end over [start, end) (seconds); None when no holdout request is there."""
    deadline_ms = pipeline.deadline_ms
    held = holdout_requests(
        pipeline_id=pipeline.pk, start_ns=start * NS, end_ns=end * NS, deadline_ms=deadline_ms
    )
    if not held.count:
        return None
    return HoldoutComparison(
        holdout=Cohort(
            count=held.count,
            p95_ms=held.p95_ms,
            p99_ms=held.p99_ms,
            within_share=held.within_share if deadline_ms is not None else None,
        ),
        everyone=_everyone(e2e, _within_share(pipeline, start, end)),
        deadline_ms=deadline_ms,
    )


def stage_holdout_comparison(
    *, pipeline: Pipeline, stage: Stage, start: int, end: int, wall: Distribution
) -> HoldoutComparison | None:
    """The stage's own time over [start, end); None when no holdout request reached it."""
    times = holdout_stage_times(pipeline_id=pipeline.pk, start_ns=start * NS, end_ns=end * NS)
    held = times.get(stage.pk)
    if held is None:
        return None
    return HoldoutComparison(
        holdout=Cohort(
            count=held.count, p95_ms=held.percentiles["p95"], p99_ms=held.percentiles["p99"]
        ),
        everyone=_everyone(wall),
        deadline_ms=None,
    )
