"""Observed figures of one pipeline over a window, shaped for its pages.

Everything comes from the rollups selectors the REST API uses (``pipeline_percentiles``,
``pipeline_series``), so a page and the API show the same numbers for the same window.
"""

from dataclasses import dataclass

from apps.core.figures import UNTRACKED_CLASS, format_ms, stage_colour
from apps.pipelines.models import Pipeline, Stage
from apps.rollups.selectors.data_span import seconds_with_data
from apps.rollups.selectors.percentiles import (
    Distribution,
    PipelinePercentiles,
    StagePercentiles,
)

OK = "ok"
OVER = "over"
VIOLATING = "violating"
NO_DATA = "no_data"
STATUS_LABELS = {OK: "within budget", OVER: "over budget", VIOLATING: "violating",
                 NO_DATA: "no data"}  # fmt: skip


def default_percentile(pipeline: Pipeline) -> str:
    """The percentile a pipeline is judged at: its end-to-end budget's, else p95."""
    headline = pipeline.headline_budget
    return headline[0] if headline else "p95"


@dataclass(frozen=True)
class StageFigures:
    """One stage's row: its wall-time percentiles against its budget, and its share."""

    stage: Stage
    colour: str
    count: int
    errors: int
    percentiles: dict[str, float | None]
    budget_percentile: str
    budget_ms: int | None
    observed_ms: float | None  # at its budget's percentile
    used: float | None  # observed / budget
    share: float | None  # of the end-to-end critical path
    critical_mean_ms: float | None
    low_confidence: bool

    @property
    def error_rate(self) -> float | None:
        return self.errors / self.count if self.count else None

    @property
    def status(self) -> str:
        if not self.count:
            return NO_DATA
        if self.low_confidence or self.used is None:
            return ""
        return OVER if self.used > 1 else OK


@dataclass(frozen=True)
class PipelineFigures:
    percentiles: PipelinePercentiles
    percentile: str
    min_samples: int
    stages: list[StageFigures]
    # Since when the pipeline has data (epoch seconds), for rates; None: none at all, or
    # not read by a page that shows no rate.
    data_from: int | None = None

    @property
    def pipeline(self) -> Pipeline:
        return self.percentiles.pipeline

    @property
    def e2e(self) -> Distribution:
        return self.percentiles.e2e

    @property
    def value_ms(self) -> float | None:
        return self.percentiles.e2e_percentiles.get(self.percentile)

    @property
    def budget_ms(self) -> int | None:
        return self.pipeline.budget.get(self.percentile)

    @property
    def used(self) -> float | None:
        if self.value_ms is None or not self.budget_ms:
            return None
        return self.value_ms / self.budget_ms

    @property
    def low_confidence(self) -> bool:
        return 0 < self.e2e.count < self.min_samples

    @property
    def error_rate(self) -> float | None:
        return self.e2e.errors / self.e2e.count if self.e2e.count else None

    @property
    def seconds_with_data(self) -> int:
        """The part of the window since the pipeline's first data: a pipeline sending for
        three minutes has three minutes of traffic in its last hour, not sixty."""
        window = self.percentiles.window
        return seconds_with_data(start=window.start, end=window.end, data_from=self.data_from)

    @property
    def partial_window(self) -> bool:
        """Whether the data covers less than the window."""
        window = self.percentiles.window
        return 0 < self.seconds_with_data < window.end - window.start

    @property
    def per_minute(self) -> float | None:
        """Traces a minute over the time with data; None without any."""
        seconds = self.seconds_with_data
        return self.e2e.count * 60 / seconds if seconds else None

    @property
    def over_budget(self) -> bool:
        """A budgeted percentile above its budget, end to end or in a stage, on enough
        samples to judge."""
        if not self.e2e.count or self.low_confidence:
            return False
        if self.percentiles.e2e_status == OVER:
            return True
        return any(stage.status == OVER for stage in self.stages)

    @property
    def worst_stage(self) -> StageFigures | None:
        """The stage most over (or nearest to) its budget."""
        judged = [s for s in self.stages if s.used is not None and not s.low_confidence]
        return max(judged, key=lambda s: s.used or 0.0, default=None)

    @property
    def largest_share(self) -> StageFigures | None:
        shared = [s for s in self.stages if s.share]
        return max(shared, key=lambda s: s.share or 0.0, default=None)

    @property
    def untracked_share(self) -> float | None:
        return self.percentiles.untracked_share


def _stage_figures(stage: StagePercentiles, min_samples: int) -> StageFigures:
    budget = stage.stage.budget_ms
    observed = stage.percentiles.get(stage.stage.budget_percentile)
    used = observed / budget if observed is not None and budget else None
    critical = stage.critical
    return StageFigures(
        stage=stage.stage,
        colour=stage_colour(stage.ordinal),
        count=stage.wall.count,
        errors=stage.wall.errors,
        percentiles=stage.percentiles,
        budget_percentile=stage.stage.budget_percentile,
        budget_ms=budget,
        observed_ms=observed,
        used=used,
        share=stage.share,
        critical_mean_ms=critical.mean_ms,
        low_confidence=0 < stage.wall.count < min_samples,
    )


def pipeline_figures(
    *, percentiles: PipelinePercentiles, percentile: str, data_from: int | None = None
) -> PipelineFigures:
    """``data_from``: the pipeline's ``pipeline_data_from``, for a page that shows rates."""
    min_samples = percentiles.pipeline.min_samples
    return PipelineFigures(
        percentiles=percentiles,
        percentile=percentile,
        min_samples=min_samples,
        stages=[_stage_figures(stage, min_samples) for stage in percentiles.stages],
        data_from=data_from,
    )


def critical_path_parts(figures: PipelineFigures) -> list[tuple[str, str, float, str, str]]:
    """Where the time goes: each stage's share of the critical path, then untracked."""
    parts = [
        (
            stage.stage.slug,
            stage.stage.name,
            stage.share or 0.0,
            stage.colour,
            f"{stage.stage.name}: {(stage.share or 0) * 100:.1f} % of the critical path",
        )
        for stage in figures.stages
    ]
    if figures.untracked_share:
        parts.append(
            (
                "untracked",
                "untracked",
                figures.untracked_share,
                UNTRACKED_CLASS,
                f"untracked (orchestration, in no stage): {figures.untracked_share * 100:.1f} %"
                " of the critical path",
            )
        )
    return parts


def budget_parts(
    figures: PipelineFigures, *, within: set[int] | frozenset[int] = frozenset()
) -> list[tuple[str, str, float, str, str]]:
    """Where the budget went: each stage's budget in ms, then what no stage was given;
    stages ``within`` another's time (an engine's parts of an LLM call) are left out."""
    parts = [
        (
            stage.stage.slug,
            stage.stage.name,
            float(stage.budget_ms),
            stage.colour,
            f"{stage.stage.name}: {format_ms(stage.budget_ms)} at {stage.budget_percentile}",
        )
        for stage in figures.stages
        if stage.budget_ms and stage.stage.pk not in within
    ]
    headline = figures.pipeline.headline_budget
    allocated = sum(value for _, _, value, _, _ in parts)
    if headline and headline[1] > allocated:
        rest = headline[1] - allocated
        parts.append(("unallocated", "unallocated", rest, UNTRACKED_CLASS,
                      f"not given to any stage: {format_ms(rest)} of {format_ms(headline[1])} "
                      f"at {headline[0]}"))  # fmt: skip
    return parts
