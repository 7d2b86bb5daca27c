"""Budget fit check: do a pipeline's stage budgets agree with its end-to-end budget?

Over the complete traces of the last 7 days (analyzed at least once, root
present), computed with SQL aggregates over traces and stage samples:

* per stage, how many traces ran it, how many ran it over its budget, and that
  share of all traces and of the traces that ran it; a budget at p95 is meant to
  be exceeded by 5 % of runs, so ``expected_share`` (1 - p) is the honest yardstick;
* the traces where every budgeted stage met its budget and the end-to-end time
  still exceeded the headline budget: stage budgets that all hold yet do not
  add up, "the allocation is inconsistent";
* a suggested budget per stage, whether the end-to-end budget can be met, and the
  ways to apply them, each saying what would be over budget afterwards (see
  ``fit_suggestions``).
"""

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import connection
from django.db.models import (
    BigIntegerField,
    Count,
    Exists,
    ExpressionWrapper,
    F,
    OuterRef,
    Q,
    QuerySet,
    Sum,
)
from django.utils import timezone

from apps.analysis.models import StageSample
from apps.core.cached import cached_for
from apps.core.percentiles import PERCENTILES
from apps.core.time import NS_PER_MS, datetime_to_ns
from apps.ingest.models import Trace
from apps.pipelines.models import Pipeline, Stage
from apps.pipelines.selectors import stages_marking_engine_parts
from apps.rollups.selectors.fit_plans import FitPlan, fit_plans
from apps.rollups.selectors.fit_suggestions import suggest_budgets

PERIOD = timedelta(days=7)
# A week's scan is not repeated for every member who opens the page within a minute.
CACHE_S = 60
# The budget percentiles as integer percents, in PERCENTILES order.
PERCENTS = tuple(int(p[1:]) for p in PERCENTILES)
# Typed: Django would call a difference of big integers an IntegerField and turn a
# comparison with more than 2**31 ns (2.1 s) into an empty result.
DURATION_NS = ExpressionWrapper(F("end_ns") - F("start_ns"), output_field=BigIntegerField())


@dataclass(frozen=True)
class StageFit:
    stage: Stage
    percentile: str
    budget_ms: int | None
    runs: int
    over_budget: int | None
    share_over_budget: float | None
    share_of_runs_over_budget: float | None
    expected_share: float
    observed_ms: float | None
    critical_fraction: float | None
    suggested_ms: int | None
    # The budget that would keep the end-to-end budget when it cannot be met.
    target_ms: int | None = None

    @property
    def target_below_observed_ms(self) -> float | None:
        """How far the target is under what the stage does: what it must get faster by."""
        if self.target_ms is None or self.observed_ms is None:
            return None
        return self.observed_ms - self.target_ms if self.observed_ms > self.target_ms else None


@dataclass(frozen=True)
class PipelineFit:
    pipeline: Pipeline
    start: datetime
    end: datetime
    traces: int
    percentile: str | None
    budget_ms: int | None
    observed_ms: float | None
    over_budget: int | None
    share_over_budget: float | None
    expected_share: float | None
    inconsistent: int | None
    share_inconsistent: float | None
    untracked_ms: float | None
    scale: float | None
    stages: list[StageFit]
    # U + the stages' observed on-path time: what the stages spend as they run.
    needed_ms: float | None = None
    # Whether the end-to-end budget can be met by the stages as observed.
    met: bool | None = None
    suggested_e2e_ms: int | None = None
    plans: list[FitPlan] = field(default_factory=list)


def _share(part: int | None, whole: int) -> float | None:
    return part / whole if part is not None and whole else None


@dataclass(frozen=True)
class TraceSet:
    """The pipeline's complete traces (analyzed at least once) starting in [start, end)."""

    pipeline: Pipeline
    start_ns: int
    end_ns: int

    def queryset(self) -> QuerySet[Trace]:
        return Trace.objects.filter(
            team_id=self.pipeline.team_id,
            pipeline_id=self.pipeline.pk,
            start_ns__gte=self.start_ns,
            start_ns__lt=self.end_ns,
            end_ns__isnull=False,
            finalized_at__isnull=False,
            incomplete=False,
        )


def _percentiles_sql(
    table: str, value_sql: str, where_sql: str, params: list[Any], group: str
) -> dict[int, list[float]]:
    """p50/p90/p95/p99 by nearest rank (``percentile_disc``) of a column, by ``group``."""
    fractions = ", ".join(str(percent / 100) for percent in PERCENTS)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {group}, percentile_disc(ARRAY[{fractions}]) "
            f"WITHIN GROUP (ORDER BY {value_sql}) FROM {table} WHERE {where_sql} "
            f"GROUP BY {group}",
            params,
        )
        return {row[0]: [float(v) for v in row[1]] for row in cursor.fetchall()}


def stage_percentiles(traces: TraceSet) -> dict[int, list[float]]:
    """Nearest-rank p50/p90/p95/p99 of each stage's wall time (ns) by stage id."""
    return _percentiles_sql(
        f'"{StageSample._meta.db_table}"',
        "wall_ns",
        "pipeline_id = %s AND start_ns >= %s AND start_ns < %s",
        [traces.pipeline.pk, traces.start_ns, traces.end_ns],
        "stage_id",
    )


def trace_percentiles(traces: TraceSet) -> tuple[list[float], list[float]] | None:
    """Nearest-rank p50..p99 of the end-to-end time and of the untracked critical time (ns)."""
    where = (
        "team_id = %s AND pipeline_id = %s AND start_ns >= %s AND start_ns < %s "
        "AND end_ns IS NOT NULL AND finalized_at IS NOT NULL AND NOT incomplete"
    )
    params = [traces.pipeline.team_id, traces.pipeline.pk, traces.start_ns, traces.end_ns]
    table = f'"{Trace._meta.db_table}"'
    durations = _percentiles_sql(table, "end_ns - start_ns", where, params, "pipeline_id")
    untracked = _percentiles_sql(table, "untracked_critical_ns", where, params, "pipeline_id")
    if traces.pipeline.pk not in durations:
        return None
    return durations[traces.pipeline.pk], untracked[traces.pipeline.pk]


def _over_budget(stages: Sequence[Stage]) -> Q | None:
    """Samples of any budgeted stage over its budget; None when no stage has a budget."""
    condition = None
    for stage in stages:
        if stage.budget_ms is not None:
            over = Q(stage_id=stage.pk, wall_ns__gt=stage.budget_ms * NS_PER_MS)
            condition = over if condition is None else condition | over
    return condition


def _expected_share(percentile: str) -> float:
    return (100 - PERCENTS[PERCENTILES.index(percentile)]) / 100


def _trace_counts(traces: TraceSet, headline: tuple[str, int] | None, over_any: Q | None) -> Any:
    """Traces; over the end-to-end budget; and over it while every stage met its budget."""
    aggregates = {"traces": Count("pk")}
    queryset = traces.queryset()
    if headline is not None:
        queryset = queryset.annotate(elapsed_ns=DURATION_NS)
        e2e_over = Q(elapsed_ns__gt=headline[1] * NS_PER_MS)
        inconsistent = e2e_over
        if over_any is not None:
            samples = StageSample.objects.filter(
                over_any, trace_pk=OuterRef("pk"), start_ns=OuterRef("start_ns")
            )
            queryset = queryset.annotate(stage_over=Exists(samples))
            inconsistent &= Q(stage_over=False)
        aggregates["over"] = Count("pk", filter=e2e_over)
        aggregates["inconsistent"] = Count("pk", filter=inconsistent)
    return queryset.aggregate(**aggregates)


def _stage_counts(traces: TraceSet, over_any: Q | None) -> dict[int, dict[str, Any]]:
    """Runs, runs over budget, and summed wall and critical-path time, by stage id."""
    aggregates = {"runs": Count("trace_pk"), "wall": Sum("wall_ns"), "critical": Sum("critical_ns")}
    if over_any is not None:
        aggregates["over"] = Count("trace_pk", filter=over_any)
    rows = (
        StageSample.objects.filter(
            pipeline_id=traces.pipeline.pk,
            start_ns__gte=traces.start_ns,
            start_ns__lt=traces.end_ns,
        )
        .values("stage_id")
        .annotate(**aggregates)
    )
    return {row["stage_id"]: dict(row) for row in rows}


def _stages(pipeline: Pipeline) -> list[Stage]:
    """The stages that share the end-to-end time: the parts of an LLM call that an engine's
    timings give (``Stage.engine_part``) lie within its stages and are left out."""
    return [stage for stage, part in stages_marking_engine_parts(pipeline=pipeline) if not part]


def pipeline_fit_recent(*, pipeline: Pipeline, now: datetime | None = None) -> PipelineFit:
    """The fit check over the last 7 days, as computed within the last ``CACHE_S``.

    The cached answer belongs to the budgets it was computed for: a changed budget (an
    applied suggestion) is a new key, so the page never shows a fit of old budgets.
    """
    stages = _stages(pipeline)
    budgets = [pipeline.headline_budget] + [
        (s.pk, s.slug, s.name, s.budget_ms, s.budget_percentile) for s in stages
    ]
    digest = hashlib.sha256(repr(budgets).encode()).hexdigest()[:24]
    return cached_for(
        f"rollups:fit:{pipeline.pk}:{digest}",
        seconds=CACHE_S,
        compute=lambda: pipeline_fit(pipeline=pipeline, now=now, stages=stages),
    )


def pipeline_fit(
    *, pipeline: Pipeline, now: datetime | None = None, stages: list[Stage] | None = None
) -> PipelineFit:
    """The fit check of one pipeline over the 7 days before ``now``."""
    now = now or timezone.now()
    start = now - PERIOD
    traces = TraceSet(pipeline, datetime_to_ns(start), datetime_to_ns(now))
    if stages is None:
        stages = _stages(pipeline)
    headline = pipeline.headline_budget
    over_any = _over_budget(stages)

    totals = _trace_counts(traces, headline, over_any)
    trace_count = totals["traces"]
    by_stage = _stage_counts(traces, over_any)
    percentiles = stage_percentiles(traces)
    observed = {
        stage.pk: percentiles[stage.pk][PERCENTILES.index(stage.budget_percentile)] / NS_PER_MS
        for stage in stages
        if stage.pk in percentiles
    }
    fraction = {
        stage_id: min(1.0, (row["critical"] or 0) / row["wall"]) if row["wall"] else 0.0
        for stage_id, row in by_stage.items()
    }
    e2e_observed = untracked = None
    trace_values = trace_percentiles(traces) if headline is not None else None
    if headline is not None and trace_values is not None:
        position = PERCENTILES.index(headline[0])
        e2e_observed = trace_values[0][position] / NS_PER_MS
        untracked = trace_values[1][position] / NS_PER_MS
    suggestions = suggest_budgets(
        observed_ms=observed,
        critical_fraction=fraction,
        budget_ms=headline[1] if headline else None,
        untracked_ms=untracked or 0.0,
        e2e_observed_ms=e2e_observed,
    )

    stage_fits = []
    for stage in stages:
        row = by_stage.get(stage.pk, {})
        runs = row.get("runs", 0)
        over = row.get("over", 0) if stage.budget_ms is not None else None
        stage_fits.append(
            StageFit(
                stage=stage,
                percentile=stage.budget_percentile,
                budget_ms=stage.budget_ms,
                runs=runs,
                over_budget=over,
                share_over_budget=_share(over, trace_count),
                share_of_runs_over_budget=_share(over, runs),
                expected_share=_expected_share(stage.budget_percentile),
                observed_ms=observed.get(stage.pk),
                critical_fraction=fraction.get(stage.pk) if runs else None,
                suggested_ms=suggestions.stage_ms.get(stage.pk),
                target_ms=suggestions.target_ms.get(stage.pk),
            )
        )
    return PipelineFit(
        pipeline=pipeline,
        start=start,
        end=now,
        traces=trace_count,
        percentile=headline[0] if headline else None,
        budget_ms=headline[1] if headline else None,
        observed_ms=e2e_observed,
        over_budget=totals.get("over"),
        share_over_budget=_share(totals.get("over"), trace_count),
        expected_share=_expected_share(headline[0]) if headline else None,
        inconsistent=totals.get("inconsistent"),
        share_inconsistent=_share(totals.get("inconsistent"), trace_count),
        untracked_ms=untracked,
        scale=suggestions.scale,
        stages=stage_fits,
        needed_ms=suggestions.needed_ms,
        met=suggestions.met,
        suggested_e2e_ms=suggestions.e2e_ms,
        plans=fit_plans(
            suggestions=suggestions,
            stages=stages,
            observed_ms=observed,
            headline=headline,
            e2e_observed_ms=e2e_observed,
        ),
    )
