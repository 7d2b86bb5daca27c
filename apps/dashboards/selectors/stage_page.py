"""One stage of a pipeline: its percentile over time, its distribution, its slowest traces."""

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from apps.analysis.selectors.recompute import figures_predate_rules
from apps.analysis.selectors.samples import SlowSample, slowest_samples
from apps.core.figures import stage_colour
from apps.dashboards.charts import Histogram, LineChart, ShareChart, histogram, share_chart
from apps.dashboards.ranges import Range
from apps.dashboards.selectors.degradations_panel import DegradationPanel, degradation_panel
from apps.dashboards.selectors.figures import StageFigures, pipeline_figures
from apps.dashboards.selectors.pipeline_page import (
    percentile_chart,
    violation_bands,
    violations_during,
)
from apps.pipelines.models import Pipeline, Stage
from apps.pipelines.stream_budget import MAX_CHUNK_GAP, TIME_PER_OUTPUT_TOKEN
from apps.rollups.models import Measure, Violation
from apps.rollups.selectors import pipeline_percentiles
from apps.rollups.selectors.llm import stage_llm_figures, stage_model_shares
from apps.rollups.selectors.percentiles import Distribution
from apps.rollups.selectors.windows import resolution_availability

HISTOGRAM_BINS = 48
SLOWEST = 10
SHOWN = ("p50", "p95", "p99")
STREAM_ROWS = (
    (Measure.TIME_PER_OUTPUT_TOKEN, "Time per output token", "ms",
     "after the first token: the generation's time over the tokens after the first",
     TIME_PER_OUTPUT_TOKEN),
    (Measure.OUTPUT_TOKENS_PER_S, "Output tokens per second", "tokens/s",
     "all output tokens over the time after the first token; lower is slower", None),
    (Measure.MAX_CHUNK_GAP, "Longest gap between chunks", "ms",
     "per answer, the longest wait for the next chunk: past its budget, a stream stall",
     MAX_CHUNK_GAP),
)  # fmt: skip


@dataclass(frozen=True)
class StreamRow:
    label: str
    unit: str  # "ms", or "tokens/s"
    hint: str
    count: int
    values: dict[str, float | None]  # p50, p95, p99
    budget: tuple[str, int] | None = None  # (percentile, ms) of the stage's stream budget
    over: bool = False  # the budgeted percentile is above it
    stalls: int | None = None  # answers whose longest gap passed the gap budget

    @property
    def stall_share(self) -> float | None:
        return None if self.stalls is None or not self.count else self.stalls / self.count


@dataclass(frozen=True)
class ModelRow:
    label: str
    provider: str
    colour: str
    count: int
    share: float
    wall: dict[str, float | None]
    per_token_p95: float | None
    tokens_per_s_p50: float | None


@dataclass(frozen=True)
class ModelPanel:
    """What the stage's LLM calls say: how answers streamed, and which models served it."""

    streams: list[StreamRow]
    models: list[ModelRow]
    shares: ShareChart | None  # with two models or more

    @property
    def empty(self) -> bool:
        return not self.streams and not self.models


def _values(distribution: Distribution) -> dict[str, float | None]:
    return {name: distribution.percentile(name) for name in SHOWN}


def model_panel(
    *, pipeline: Pipeline, stage: Stage, range_: Range, available: Mapping[int, float]
) -> ModelPanel:
    figures = stage_llm_figures(
        pipeline=pipeline, stage=stage, start=range_.start, end=range_.end, available=available
    )
    streams = [
        _stream_row(
            label,
            unit,
            hint,
            figures.streams[measure],
            stage.stream_budget.get(key) if key else None,
            key,
        )
        for measure, label, unit, hint, key in STREAM_ROWS
        if measure in figures.streams
    ]
    colours = [stage_colour(index) for index in range(len(figures.models))]
    models = [
        ModelRow(
            label=row.model.model,
            provider=row.model.provider,
            colour=colour,
            count=row.wall.count,
            share=row.share,
            wall=_values(row.wall),
            per_token_p95=_percentile(row.streams.get(Measure.TIME_PER_OUTPUT_TOKEN), "p95"),
            tokens_per_s_p50=_percentile(row.streams.get(Measure.OUTPUT_TOKENS_PER_S), "p50"),
        )
        for row, colour in zip(figures.models, colours, strict=True)
    ]
    shares = None
    if len(models) > 1:
        series = stage_model_shares(
            pipeline=pipeline, stage=stage, start=range_.start, end=range_.end,
            available=available,
        )  # fmt: skip
        order = {row.model.pk: colour for row, colour in zip(figures.models, colours, strict=True)}
        shares = share_chart(
            series.starts,
            [(model.label, values) for model, values in series.shares],
            start=series.window.start,
            end=series.window.end,
            step=series.step,
            colours=[order.get(model.pk, "untracked") for model, _ in series.shares],
        )
    return ModelPanel(streams, models, shares)


def _stream_row(
    label: str,
    unit: str,
    hint: str,
    stream: Distribution,
    budget: dict[str, int] | None,
    key: str | None,
) -> StreamRow:
    values = _values(stream)
    if not budget:
        return StreamRow(label, unit, hint, stream.count, values)
    ((percentile, ms),) = budget.items()
    observed = stream.percentile(percentile)
    return StreamRow(
        label,
        unit,
        hint,
        stream.count,
        values,
        budget=(percentile, ms),
        over=observed is not None and observed > ms,
        stalls=stream.sketch.count_above(ms) if key == MAX_CHUNK_GAP else None,
    )


def _percentile(distribution: Distribution | None, name: str) -> float | None:
    return None if distribution is None else distribution.percentile(name)


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
    models: ModelPanel

    @property
    def open_violation(self) -> Violation | None:
        """The stage's violation open now at its budget's percentile, if the range shows
        it: while it holds, the stage's card is not green."""
        percentile = self.figures.budget_percentile
        return next(
            (
                v
                for v in self.violations
                if v.closed_at is None and v.percentile == percentile and not v.measure_words
            ),
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
        models=model_panel(pipeline=pipeline, stage=stage, range_=range_, available=available),
    )
