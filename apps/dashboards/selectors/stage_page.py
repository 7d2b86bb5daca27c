"""One stage of a pipeline: its percentile over time, its distribution, its slowest traces."""

from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from apps.analysis.selectors.recompute import figures_predate_rules
from apps.analysis.selectors.samples import SlowSample, slowest_samples
from apps.dashboards.charts import Histogram, LineChart, histogram
from apps.dashboards.ranges import Range
from apps.dashboards.selectors.degradations_panel import DegradationPanel, degradation_panel
from apps.dashboards.selectors.figures import StageFigures, pipeline_figures
from apps.dashboards.selectors.pipeline_page import (
    percentile_chart,
    violation_bands,
    violations_during,
)
from apps.pipelines.models import Pipeline, Stage
from apps.rollups.models import Measure, Violation
from apps.rollups.selectors import pipeline_percentiles
from apps.rollups.selectors.windows import resolution_availability

HISTOGRAM_BINS = 48
SLOWEST = 10


@dataclass(frozen=True)
class StagePage:
    figures: StageFigures
    wall_chart: LineChart
    critical_chart: LineChart
    distribution: Histogram
    slowest: list[SlowSample]
    violations: list[Violation]
    budget_shown: bool  # the chart's percentile is the one the budget is set at
    # Traces of the range that started before this were analysed with earlier rules.
    earlier_rules_until: datetime | None
    traces: int  # of the pipeline in the range, with a span in this stage or not
    degradations: DegradationPanel

    @property
    def open_violation(self) -> Violation | None:
        """The stage's violation open now at its budget's percentile, if the range shows
        it: while it holds, the stage's card is not green."""
        percentile = self.figures.budget_percentile
        return next(
            (v for v in self.violations if v.closed_at is None and v.percentile == percentile),
            None,
        )


def stage_page(
    *, pipeline: Pipeline, stage: Stage, range_: Range, now: datetime | None = None
) -> StagePage:
    now = now or timezone.now()
    available = resolution_availability(pipeline_id=pipeline.pk)
    # Its critical-path percentiles come from the series; the figures need its sum only.
    percentiles = pipeline_percentiles(
        pipeline=pipeline,
        start=range_.start,
        end=range_.end,
        critical_sketches=False,
        stage=stage,
        available=available,
    )
    (row,) = pipeline_figures(percentiles=percentiles, percentile=range_.percentile).stages
    (wall,) = (s.wall for s in percentiles.stages)
    budget_shown = stage.budget_percentile == range_.percentile
    budget = stage.budget_ms if budget_shown else None
    violations = [
        v for v in violations_during(pipeline=pipeline, start=range_.start, end=range_.end)
        if v.stage_id == stage.pk
    ]  # fmt: skip
    bands = violation_bands(violations, stage_id=stage.pk, now=now)
    return StagePage(
        figures=row,
        traces=percentiles.e2e.count,
        wall_chart=percentile_chart(
            pipeline,
            stage_id=stage.pk,
            measure=Measure.WALL,
            range_=range_,
            budget_ms=budget,
            label=f"{stage.name} {range_.percentile}",
            bands=bands,
            available=available,
        ),
        critical_chart=percentile_chart(
            pipeline,
            stage_id=stage.pk,
            measure=Measure.CRITICAL,
            range_=range_,
            budget_ms=None,
            label=f"{stage.name} on the critical path, {range_.percentile}",
            bands=[],
            available=available,
        ),
        distribution=histogram(
            wall.sketch.histogram(HISTOGRAM_BINS),
            marks=[(p, row.percentiles.get(p)) for p in ("p50", "p95", "p99")],
            budget_ms=stage.budget_ms,
        ),
        slowest=slowest_samples(
            pipeline_id=pipeline.pk,
            stage_id=stage.pk,
            start=range_.start,
            end=range_.end,
            limit=SLOWEST,
        ),
        violations=violations,
        budget_shown=budget_shown,
        earlier_rules_until=figures_predate_rules(
            pipeline=pipeline, start=range_.start, end=range_.end
        ),
        degradations=degradation_panel(
            pipeline=pipeline,
            range_=range_,
            requests=percentiles.e2e.count,
            everyone=wall,
            stages=[stage],
            stage=stage,
        ),
    )
