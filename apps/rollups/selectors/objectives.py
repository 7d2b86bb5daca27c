"""Objectives: error budget and burn rates from the good/total counts of end-to-end rollups.

An objective says "``target`` percent of requests finish under ``threshold_ms``";
the rollup engine counts the end-to-end values within the threshold of each
bucket in ``good_count``. Over a window, the bad fraction is (total - good) /
total; the burn rate is that fraction over the allowed one, 1 - target, so a
burn rate of 1 spends the error budget exactly over the objective's period.

A window is judged only once the pipeline's data covers ``BURN_RATE_MIN_COVERAGE`` of
it: twenty seconds of a new pipeline's traffic say nothing about three days.
"""

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db.models import Q, Sum
from django.utils import timezone

from apps.core.time import align_down, to_datetime, to_seconds
from apps.pipelines.models import Pipeline
from apps.rollups.models import E2E_STAGE_ID, Measure, RollupBucket
from apps.rollups.selectors.data_span import coverage, pipeline_data_from
from apps.rollups.selectors.windows import TileRun, tile_runs

BUDGET_PERIOD = timedelta(days=30)
BURN_WINDOWS = (
    ("5m", timedelta(minutes=5)),
    ("30m", timedelta(minutes=30)),
    ("1h", timedelta(hours=1)),
    ("6h", timedelta(hours=6)),
    ("3d", timedelta(days=3)),
)
# Fine buckets are kept for a short time only: the last hour is read down to 10 s
# buckets, older time down to minutes, and the old edge of a window of days (whose
# minutes may be gone) down to hours, counting the whole hour it falls in.
RECENT = timedelta(hours=1)
RECENT_RESOLUTIONS = (3600, 60, 10)
OLDER_RESOLUTIONS = (86400, 3600, 60)
LONG_WINDOW = timedelta(days=2)
LONG_RESOLUTIONS = (86400, 3600)


def objective_tiles(*, start: datetime, end: datetime) -> list[TileRun]:
    # Whole seconds that still reach into the buckets the window's ends fall in: an end
    # a fraction of a second into a bucket counts that bucket.
    start_s, end_s = to_seconds(start), math.ceil(end.timestamp())
    older = LONG_RESOLUTIONS if end - start > LONG_WINDOW else OLDER_RESOLUTIONS
    cut = max(start_s, align_down(int((end - RECENT).timestamp()), older[-1]))
    return [
        *tile_runs(start=start_s, end=cut, resolutions=older),
        *tile_runs(start=cut, end=end_s, resolutions=RECENT_RESOLUTIONS),
    ]


def good_total(*, pipeline_id: int, start: datetime, end: datetime) -> tuple[int, int]:
    """(good, total) end-to-end counts of the pipeline's traces starting in [start, end)."""
    condition = Q()
    for resolution, low, high in objective_tiles(start=start, end=end):
        condition |= Q(
            resolution=resolution,
            bucket_start__gte=to_datetime(low),
            bucket_start__lt=to_datetime(high),
        )
    if not condition:
        return 0, 0
    totals = RollupBucket.objects.filter(
        condition, pipeline_id=pipeline_id, stage_id=E2E_STAGE_ID, measure=Measure.WALL
    ).aggregate(good=Sum("good_count"), total=Sum("count"))
    return totals["good"] or 0, totals["total"] or 0


def window_coverage(*, data_from: int | None, seconds: int, now: datetime) -> float:
    """The share of the ``seconds`` before ``now`` that the pipeline's data covers."""
    end = math.ceil(now.timestamp())
    return coverage(start=end - seconds, end=end, data_from=data_from)


def window_judged(share: float) -> bool:
    """Whether a window with data over ``share`` of it has enough to judge a burn rate."""
    return share >= float(settings.BURN_RATE_MIN_COVERAGE)


@dataclass(frozen=True)
class BurnRate:
    window: str
    seconds: int
    total: int
    good: int
    bad_fraction: float | None
    burn_rate: float | None
    coverage: float  # the share of the window the pipeline's data covers, 0 to 1
    judged: bool  # enough of the window has data for its burn rate to fire an alert

    @property
    def seconds_with_data(self) -> int:
        return round(self.coverage * self.seconds)


@dataclass(frozen=True)
class ObjectiveStatus:
    target: Decimal
    threshold_ms: int
    period_days: int
    total: int
    good: int
    bad: int
    allowed_bad: float
    error_budget_remaining: float | None
    burn_rates: list[BurnRate]
    computed_at: datetime
    min_coverage: float  # BURN_RATE_MIN_COVERAGE when computed


def pipeline_objective_status(
    *, pipeline: Pipeline, now: datetime | None = None
) -> ObjectiveStatus | None:
    """Error budget left over the last 30 days and burn rates, or None without an objective.

    ``error_budget_remaining`` is (allowed bad - bad) / allowed bad, where allowed
    bad is (1 - target) x total: 1 when nothing failed, 0 when spent, negative
    when overspent, None without traffic.
    """
    if pipeline.objective_target is None or pipeline.objective_threshold_ms is None:
        return None
    now = now or timezone.now()
    allowed_fraction = 1 - float(pipeline.objective_target) / 100
    good, total = good_total(pipeline_id=pipeline.pk, start=now - BUDGET_PERIOD, end=now)
    bad = total - good
    allowed_bad = allowed_fraction * total
    burn_rates = []
    data_from = pipeline_data_from(pipeline_id=pipeline.pk)
    for name, length in BURN_WINDOWS:
        window_good, window_total = good_total(pipeline_id=pipeline.pk, start=now - length, end=now)
        fraction = (window_total - window_good) / window_total if window_total else None
        seconds = int(length.total_seconds())
        share = window_coverage(data_from=data_from, seconds=seconds, now=now)
        burn_rates.append(
            BurnRate(
                window=name,
                seconds=seconds,
                total=window_total,
                good=window_good,
                bad_fraction=fraction,
                burn_rate=fraction / allowed_fraction if fraction is not None else None,
                coverage=share,
                judged=window_judged(share),
            )
        )
    return ObjectiveStatus(
        target=pipeline.objective_target,
        threshold_ms=pipeline.objective_threshold_ms,
        period_days=BUDGET_PERIOD.days,
        total=total,
        good=good,
        bad=bad,
        allowed_bad=allowed_bad,
        error_budget_remaining=(allowed_bad - bad) / allowed_bad if allowed_bad else None,
        burn_rates=burn_rates,
        computed_at=now,
        min_coverage=float(settings.BURN_RATE_MIN_COVERAGE),
    )
