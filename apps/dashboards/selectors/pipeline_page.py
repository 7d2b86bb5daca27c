"""Everything the pipeline dashboard shows for one range and percentile."""

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Q
from django.utils import timezone

from apps.analysis.selectors.recompute import figures_predate_rules
from apps.core.percentiles import QUANTILES
from apps.core.time import to_datetime
from apps.dashboards.charts import (
    LineChart,
    Segment,
    TimedValue,
    format_ms,
    line_chart,
    stacked_bar,
)
from apps.dashboards.ranges import Range
from apps.dashboards.selectors.degradations_panel import DegradationPanel, degradation_panel
from apps.dashboards.selectors.figures import (
    PipelineFigures,
    StageFigures,
    budget_parts,
    critical_path_parts,
    pipeline_figures,
)
from apps.pipelines.models import Pipeline
from apps.pipelines.selectors import Allocation, pipeline_allocation
from apps.rollups.models import E2E_STAGE_ID, Measure, Violation
from apps.rollups.selectors import pipeline_percentiles, pipeline_series
from apps.rollups.selectors.data_span import pipeline_data_from
from apps.rollups.selectors.objectives import ObjectiveStatus, pipeline_objective_status
from apps.rollups.selectors.windows import resolution_availability

CHART_POINTS = 180
SORTS = {
    "position": lambda s: s.stage.position,
    "name": lambda s: s.stage.name.lower(),
    "count": lambda s: s.count,
    "p50": lambda s: s.percentiles.get("p50") or -1,
    "p90": lambda s: s.percentiles.get("p90") or -1,
    "p95": lambda s: s.percentiles.get("p95") or -1,
    "p99": lambda s: s.percentiles.get("p99") or -1,
    "budget": lambda s: s.budget_ms or -1,
    "used": lambda s: s.used if s.used is not None else -1,
    "share": lambda s: s.share or -1,
    "errors": lambda s: s.error_rate or -1,
}
DEFAULT_SORT = "position"


def _title(violation: Violation) -> str:
    scope = violation.stage.name if violation.stage else "end to end"
    if violation.measure_words:
        scope = f"{scope} {violation.measure_words}"
    state = "open" if violation.is_open else "closed"
    return (
        f"{scope} {violation.percentile} over {format_ms(violation.budget_ms)} budget "
        f"(peak {format_ms(violation.peak_ms)}), {state}"
    )


def violations_during(*, pipeline: Pipeline, start: int, end: int) -> list[Violation]:
    """The pipeline's violations open at some point of ``[start, end)``, newest first."""
    low, high = to_datetime(start), to_datetime(end)
    return list(
        Violation.objects.filter(pipeline=pipeline, opened_at__lt=high)
        .filter(Q(closed_at__isnull=True) | Q(closed_at__gt=low))
        .select_related("stage")
        .order_by("-opened_at", "-id")[:200]
    )


def percentile_chart(
    pipeline: Pipeline,
    *,
    stage_id: int,
    measure: int,
    range_: Range,
    budget_ms: float | None,
    label: str,
    bands: list[tuple[int, int, str]],
    available: Mapping[int, float] | None = None,
) -> LineChart:
    series = pipeline_series(
        pipeline=pipeline,
        stage_id=stage_id,
        measure=measure,
        quantile=QUANTILES[range_.percentile],
        start=range_.start,
        end=range_.end,
        max_points=CHART_POINTS,
        available=available,
    )
    points = [TimedValue(p.start, p.value, p.count) for p in series.points]
    return line_chart(
        points,
        start=range_.start,
        end=range_.end,
        step=series.step,
        budget_ms=budget_ms,
        budget_label=f"{range_.percentile} budget",
        bands=bands,
        label=label,
    )


def violation_bands(
    violations: list[Violation], *, stage_id: int | None, now: datetime
) -> list[tuple[int, int, str]]:
    """Shaded periods of the chart: the violations of one scope (None: end to end)."""
    return [
        (
            int(v.opened_at.timestamp()),
            int((v.closed_at or now).timestamp()),
            _title(v),
        )
        for v in violations
        if v.stage_id == stage_id
    ]


@dataclass(frozen=True)
class PipelinePage:
    figures: PipelineFigures
    chart: LineChart
    critical_bar: list[Segment]
    budget_bar: list[Segment]
    # The stage budgets against the end-to-end budget, as the stage editor's bar has them.
    allocation: Allocation
    # Stage ids of an engine's parts of an LLM call (``Stage.engine_part``): shown within.
    within: frozenset[int]
    rows: list[StageFigures]
    sort: str
    descending: bool
    violations: list[Violation]  # open at some point of the range
    open_violations: list[Violation]  # open now
    objective: ObjectiveStatus | None
    # Traces of the range that started before this were analysed with earlier rules.
    earlier_rules_until: datetime | None
    degradations: DegradationPanel

    @property
    def e2e_violation(self) -> Violation | None:
        """An end-to-end violation open now, the one at the page's percentile first: while
        one holds, the end-to-end card is not green, whatever the range's own figure."""
        open_e2e = [v for v in self.open_violations if v.stage_id is None]
        open_e2e.sort(key=lambda v: v.percentile != self.figures.percentile)
        return open_e2e[0] if open_e2e else None


def pipeline_page(
    *,
    pipeline: Pipeline,
    range_: Range,
    sort: str = DEFAULT_SORT,
    descending: bool = False,
    now: datetime | None = None,
) -> PipelinePage:
    now = now or timezone.now()
    available = resolution_availability(pipeline_id=pipeline.pk)
    figures = pipeline_figures(
        # The page shows critical-path shares and means, never their percentiles.
        percentiles=pipeline_percentiles(
            pipeline=pipeline,
            start=range_.start,
            end=range_.end,
            critical_sketches=False,
            available=available,
        ),
        percentile=range_.percentile,
        data_from=pipeline_data_from(pipeline_id=pipeline.pk),
    )
    violations = violations_during(pipeline=pipeline, start=range_.start, end=range_.end)
    chart = percentile_chart(
        pipeline,
        stage_id=E2E_STAGE_ID,
        measure=Measure.WALL,
        range_=range_,
        budget_ms=figures.budget_ms,
        label=f"end to end {range_.percentile}",
        bands=violation_bands(violations, stage_id=None, now=now),
        available=available,
    )
    open_now = list(
        Violation.objects.filter(pipeline=pipeline, closed_at__isnull=True).select_related("stage")
    )
    # A range ending now shows what is open now, though it opened after the last 10 s tick.
    known = {v.pk for v in violations}
    violations += [v for v in open_now if v.pk not in known]
    violations.sort(key=lambda v: (v.opened_at, v.pk), reverse=True)
    sort = sort if sort in SORTS else DEFAULT_SORT
    rows = sorted(figures.stages, key=SORTS[sort], reverse=descending)
    allocation = pipeline_allocation(pipeline=pipeline)
    return PipelinePage(
        figures=figures,
        chart=chart,
        critical_bar=stacked_bar(critical_path_parts(figures)),
        budget_bar=stacked_bar(
            budget_parts(figures, within={stage.pk for stage in allocation.within})
        ),
        allocation=allocation,
        within=frozenset(stage.pk for stage in allocation.within),
        rows=rows,
        sort=sort,
        descending=descending,
        violations=violations,
        open_violations=open_now,
        objective=pipeline_objective_status(pipeline=pipeline, now=now),
        earlier_rules_until=figures_predate_rules(
            pipeline=pipeline, start=range_.start, end=range_.end
        ),
        degradations=degradation_panel(
            pipeline=pipeline,
            range_=range_,
            requests=figures.e2e.count,
            everyone=figures.e2e,
            stages=[row.stage for row in figures.stages],
        ),
    )
