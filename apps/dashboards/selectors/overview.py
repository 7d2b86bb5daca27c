"""The team home: every pipeline's end-to-end figure against its budget, at a glance."""

from collections import Counter
from dataclasses import dataclass
from datetime import datetime

from apps.core.percentiles import QUANTILES
from apps.dashboards.charts import Sparkline, TimedValue, sparkline
from apps.dashboards.selectors.figures import (
    NO_DATA,
    OK,
    OVER,
    VIOLATING,
    PipelineFigures,
    pipeline_figures,
)
from apps.pipelines.models import Pipeline
from apps.rollups.models import E2E_STAGE_ID, Measure, Violation
from apps.rollups.selectors import requested_bounds
from apps.rollups.selectors.data_span import pipelines_data_from
from apps.rollups.selectors.percentiles import pipelines_percentiles
from apps.rollups.selectors.series import pipelines_series
from apps.teams.models import Team

SPARKLINE_WINDOW = "24h"
# One point an hour: each reads the hour's own bucket (and minutes at the two ends)
# rather than 60 minute buckets, so a team with many pipelines stays fast.
SPARKLINE_POINTS = 25


@dataclass(frozen=True)
class PipelineOverview:
    figures: PipelineFigures
    sparkline: Sparkline
    open_violations: int

    @property
    def pipeline(self) -> Pipeline:
        return self.figures.pipeline

    @property
    def status(self) -> str:
        if self.open_violations:
            return VIOLATING
        if not self.figures.e2e.count:
            return NO_DATA
        return OVER if self.figures.over_budget else OK


def team_overview(
    *, team: Team, percentile: str, window: str, now: datetime | None = None
) -> list[PipelineOverview]:
    """Each of the team's pipelines, by name, over ``window`` and a 24-hour sparkline:
    a fixed number of statements however many pipelines the team has."""
    pipelines = list(Pipeline.objects.filter(team=team).order_by("name", "id"))
    start, end = requested_bounds(window=window, now=now)
    day_start, day_end = requested_bounds(window=SPARKLINE_WINDOW, now=now)
    open_counts = Counter(
        Violation.objects.filter(team=team, closed_at__isnull=True).values_list(
            "pipeline_id", flat=True
        )
    )
    percentiles = pipelines_percentiles(
        pipelines=pipelines, start=start, end=end, critical_sketches=False
    )
    data_from = pipelines_data_from(pipeline_ids=[p.pk for p in pipelines])
    series = pipelines_series(
        pipelines=pipelines,
        stage_id=E2E_STAGE_ID,
        measure=Measure.WALL,
        quantile=QUANTILES[percentile],
        start=day_start,
        end=day_end,
        max_points=SPARKLINE_POINTS,
    )
    rows = []
    for pipeline in pipelines:
        figures = pipeline_figures(
            percentiles=percentiles[pipeline.pk],
            percentile=percentile,
            data_from=data_from.get(pipeline.pk),
        )
        points = [TimedValue(p.start, p.value, p.count) for p in series[pipeline.pk].points]
        line = sparkline(
            points,
            budget_ms=pipeline.budget.get(percentile),
            title=f"{percentile} end to end over the last 24 hours",
        )
        rows.append(PipelineOverview(figures, line, open_counts.get(pipeline.pk, 0)))
    return rows
