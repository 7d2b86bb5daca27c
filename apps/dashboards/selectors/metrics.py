"""A team's figures for a Prometheus scrape: per pipeline and stage, the budget, the
observed percentiles over two windows, the counts since the pipeline began, and the
violations open.

A fixed number of statements whatever the team holds, and at most
``METRICS_MAX_PIPELINES`` pipelines and ``METRICS_MAX_STAGES`` stages read: the
rest is left out and counted, so one scrape's cost and size are bounded.
"""

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from django.conf import settings
from django.db.models import Model, QuerySet
from django.utils import timezone

from apps.core.cached import cached_for
from apps.core.time import FINEST_RESOLUTION, align_down, to_seconds
from apps.core.windows import named_windows
from apps.pipelines.models import Pipeline, Stage
from apps.rollups.models import E2E_STAGE_ID, Violation
from apps.rollups.selectors.percentiles import (
    PipelinePercentiles,
    StagePercentiles,
    pipelines_percentiles,
)
from apps.rollups.selectors.totals import Totals, day_bucket_totals
from apps.teams.models import Team

# Windows of the observed percentiles, by the name the ``window`` label carries. Five
# minutes is the budget evaluation's default window: the figure a violation compares.
WINDOWS = named_windows("5m", "1h")
# The days before today change only with traces that arrive late or are analyzed again:
# their sums are read at most this often, today's bucket on every computation.
PAST_DAYS_CACHE_S = 3600
M = TypeVar("M", bound=Model)


@dataclass(frozen=True)
class StageMetrics:
    stage: Stage
    windows: dict[str, StagePercentiles]
    totals: Totals
    open_percentiles: frozenset[str]


@dataclass(frozen=True)
class PipelineMetrics:
    pipeline: Pipeline
    windows: dict[str, PipelinePercentiles]
    totals: Totals
    open_percentiles: frozenset[str]
    stages: list[StageMetrics] = field(default_factory=list)


@dataclass(frozen=True)
class TeamMetrics:
    team: Team
    computed_at: datetime
    pipelines: list[PipelineMetrics]
    omitted_pipelines: int
    omitted_stages: int


def window_bounds(*, now: datetime, seconds: int) -> tuple[int, int]:
    """``[start, end)`` ending with the 10 s bucket that holds ``now``, as the budget
    evaluation reads its window (``evaluation_window``)."""
    end = align_down(to_seconds(now), FINEST_RESOLUTION) + FINEST_RESOLUTION
    return end - seconds, end


def team_metrics(*, team: Team, now: datetime | None = None) -> TeamMetrics:
    now = now or timezone.now()
    max_pipelines, max_stages = settings.METRICS_MAX_PIPELINES, settings.METRICS_MAX_STAGES
    all_pipelines = Pipeline.objects.filter(team=team).order_by("slug", "id")
    pipelines, omitted_pipelines = _bounded(all_pipelines, max_pipelines)
    all_stages = Stage.objects.filter(pipeline__in=pipelines).order_by(
        "pipeline__slug", "pipeline_id", "position", "id"
    )
    stages, omitted_stages = _bounded(all_stages, max_stages)

    percentiles = {
        name: pipelines_percentiles(
            pipelines=pipelines,
            start=start,
            end=end,
            critical_sketches=False,
            stages=stages,
        )
        for name, window in WINDOWS.items()
        for start, end in [window_bounds(now=now, seconds=window.seconds)]
    }
    totals = _totals_since_start(team=team, pipelines=pipelines, stages=stages, now=now)
    open_percentiles: dict[tuple[int, int], set[str]] = defaultdict(set)
    for pipeline_id, stage_id, percentile in Violation.objects.filter(
        team=team, pipeline__in=pipelines, closed_at__isnull=True
    ).values_list("pipeline_id", "stage_id", "percentile"):
        open_percentiles[(pipeline_id, stage_id or E2E_STAGE_ID)].add(percentile)

    stage_figures = {
        (name, figures.stage.pk): figures
        for name, by_id in percentiles.items()
        for pipeline_figures in by_id.values()
        for figures in pipeline_figures.stages
    }
    by_pipeline: dict[int, list[StageMetrics]] = defaultdict(list)
    for stage in stages:
        key = (stage.pipeline_id, stage.pk)
        by_pipeline[stage.pipeline_id].append(
            StageMetrics(
                stage=stage,
                windows={name: stage_figures[(name, stage.pk)] for name in WINDOWS},
                totals=totals.get(key, Totals()),
                open_percentiles=_open(open_percentiles, *key),
            )
        )
    return TeamMetrics(
        team=team,
        computed_at=now,
        pipelines=[
            PipelineMetrics(
                pipeline=pipeline,
                windows={name: percentiles[name][pipeline.pk] for name in WINDOWS},
                totals=totals.get((pipeline.pk, E2E_STAGE_ID), Totals()),
                open_percentiles=_open(open_percentiles, pipeline.pk, E2E_STAGE_ID),
                stages=by_pipeline.get(pipeline.pk, []),
            )
            for pipeline in pipelines
        ],
        omitted_pipelines=omitted_pipelines,
        omitted_stages=omitted_stages,
    )


def _bounded(rows: QuerySet[M], cap: int) -> tuple[list[M], int]:
    """The first ``cap`` rows and how many more there are (counted only past the cap)."""
    found = list(rows[: cap + 1])
    if len(found) <= cap:
        return found, 0
    return found[:cap], rows.count() - cap


def _open(
    found: dict[tuple[int, int], set[str]], pipeline_id: int, stage_id: int
) -> frozenset[str]:
    return frozenset(found.get((pipeline_id, stage_id), ()))


def _totals_since_start(
    *, team: Team, pipelines: list[Pipeline], stages: list[Stage], now: datetime
) -> dict[tuple[int, int], Totals]:
    """Day bucket sums: the days before today from the shared cache (refreshed hourly and
    at midnight UTC), today's bucket read now. Either part only grows, so the sum does."""
    today = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    pipeline_ids = [p.pk for p in pipelines]
    stage_ids = [s.pk for s in stages]
    past = cached_for(
        f"metrics:past-days:{team.pk}:{today.date().isoformat()}",
        seconds=PAST_DAYS_CACHE_S,
        compute=lambda: day_bucket_totals(
            pipeline_ids=pipeline_ids, stage_ids=stage_ids, before=today
        ),
    )
    current = day_bucket_totals(
        pipeline_ids=pipeline_ids,
        stage_ids=stage_ids,
        since=today,
        before=today + timedelta(days=1),
    )
    return {
        key: past.get(key, Totals()) + current.get(key, Totals())
        for key in past.keys() | current.keys()
    }
