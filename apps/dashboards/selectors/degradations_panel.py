"""The degradation ledger as the pipeline and stage pages show it: the range's figures,
decisions over time, and per stage what the run-time clients did."""

from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlencode

from apps.core.time import to_datetime
from apps.dashboards.charts import LineChart, TimedValue, line_chart
from apps.dashboards.ranges import Range
from apps.dashboards.selectors.holdout_comparison import (
    HoldoutComparison,
    pipeline_holdout_comparison,
    stage_holdout_comparison,
)
from apps.pipelines.models import Pipeline, Stage
from apps.rollups.selectors.degradations import (
    PipelineLedger,
    StageLedger,
    degradation_counts,
    pipeline_ledger,
)
from apps.rollups.selectors.percentiles import Distribution

CHART_STEPS = 60


@dataclass(frozen=True)
class DegradationPanel:
    ledger: PipelineLedger
    chart: LineChart
    # The stages with a decision in the range, or only the page's stage.
    rows: list[StageLedger]
    # Query of the trace list for the range's degraded traces (add ``&stage=…``).
    traces_query: str
    step: int
    # The holdout beside every request: the levers' effect measured.
    holdout: HoldoutComparison | None = None

    @property
    def step_label(self) -> str:
        return f"{self.step // 60} min" if self.step % 60 == 0 else f"{self.step} s"

    @property
    def empty(self) -> bool:
        return not self.ledger.total.decisions


def _count(value: float) -> str:
    return f"{value:g}"


def _step(range_: Range) -> int:
    """Seconds per point, on the rollups' 10-second grid, about ``CHART_STEPS`` points."""
    span = max(range_.end - range_.start, 10)
    return max(-(-span // CHART_STEPS // 10) * 10, 10)


def degradation_panel(
    *,
    pipeline: Pipeline,
    range_: Range,
    requests: int,
    everyone: Distribution,
    stages: Sequence[Stage],
    stage: Stage | None = None,
) -> DegradationPanel:
    """``everyone`` and ``stages``: the range's end-to-end times (the stage's own on a
    stage's page) and the pipeline's stages in order, from the figures the page read;
    ``requests``: the range's end-to-end count."""
    ledger = pipeline_ledger(
        pipeline=pipeline, start=range_.start, end=range_.end, requests=requests, stages=stages
    )
    start, end = range_.start, range_.end
    holdout = (
        pipeline_holdout_comparison(pipeline=pipeline, start=start, end=end, e2e=everyone)
        if stage is None
        else stage_holdout_comparison(
            pipeline=pipeline, stage=stage, start=start, end=end, wall=everyone
        )
    )
    step = _step(range_)
    counts = (
        degradation_counts(
            pipeline=pipeline, start=range_.start, end=range_.end, step=step, stage=stage
        )
        if ledger.total.decisions
        else {}
    )
    first = range_.start // step * step
    points = [
        TimedValue(moment, counts.get(moment, 0), counts.get(moment, 0))
        for moment in range(first, range_.end, step)
    ]
    chart = line_chart(
        points,
        start=range_.start,
        end=range_.end,
        step=step,
        label="decisions",
        value_format=_count,
        height=160,
    )
    if stage is None:
        rows = [row for row in ledger.stages if row.tally.decisions]
    else:
        rows = [row for row in ledger.stages if row.stage.pk == stage.pk]
    traces_query = urlencode(
        {
            "pipeline": pipeline.slug,
            "degraded": "on",
            "from": to_datetime(range_.start).strftime("%Y-%m-%dT%H:%M:%S"),
            "to": to_datetime(range_.end).strftime("%Y-%m-%dT%H:%M:%S"),
        }
    )
    return DegradationPanel(ledger, chart, rows, traces_query, step, holdout)
