"""Budget fit check: do a pipeline's stage budgets agree with its end-to-end budget?

Over the complete traces of the last 7 days (finalized at least once, root
present), computed with SQL aggregates over traces and stage samples:

* per stage, how many traces ran it, how many ran it over its budget, and that
  share of all traces and of the traces that ran it; a budget at p95 is meant to
  be exceeded by 5 % of runs, so ``expected_share`` (1 - p) is the honest yardstick;
* the traces where every budgeted stage met its budget and the end-to-end time
  still exceeded the headline budget: stage budgets that all hold yet do not
  add up, "the allocation is inconsistent";
* a suggested budget per stage (see ``suggest_budgets``).
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np
from django.db import connection
from django.db.models import Count, Exists, F, OuterRef, Q, Sum
from django.utils import timezone

from apps.ingest.models import Trace
from apps.pipelines.models import Pipeline, Stage
from apps.rollups.models import StageSample
from apps.rollups.sketch import _nearest_rank

PERIOD = timedelta(days=7)
HEADROOM = 0.10
QUANTILES = {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99}
NS_PER_MS = 1_000_000


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


def _share(part: int | None, whole: int) -> float | None:
    return part / whole if part is not None and whole else None


def _ns(moment: datetime) -> int:
    return int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1000


@dataclass(frozen=True)
class TraceSet:
    """The pipeline's complete traces (finalized at least once) starting in [start, end)."""

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


def _nearest_rank_values(values: list[int]) -> list[float]:
    ordered = sorted(values)
    # Integer percents keep ceil(p x n) exact, as percentile_disc does.
    return [float(ordered[max(1, -(-percent * len(ordered) // 100)) - 1]) for percent in PERCENTS]


def _percentiles_sql(
    table: str, value_sql: str, where_sql: str, params: Sequence[object], group: str
) -> dict[int, list[float]]:
    """p50/p90/p95/p99 by nearest rank (``percentile_disc``) of a column, by ``group``."""
    fractions = ", ".join(str(percent / 100) for percent in PERCENTS)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {group}, percentile_disc(ARRAY[{fractions}]) "
            f"WITHIN GROUP (ORDER BY {value_sql}) FROM {table} WHERE {where_sql} "
            f"GROUP BY {group}",
            list(params),
        )
        return {row[0]: [float(v) for v in row[1]] for row in cursor.fetchall()}


def stage_percentiles(traces: TraceSet) -> dict[int, list[float]]:
    """Nearest-rank p50/p90/p95/p99 of each stage's wall time (ns) by stage id."""
    if connection.vendor == "postgresql":
        return _percentiles_sql(
            f'"{StageSample._meta.db_table}"',
            "wall_ns",
            "pipeline_id = %s AND start_ns >= %s AND start_ns < %s",
            [traces.pipeline.pk, traces.start_ns, traces.end_ns],
            "stage_id",
        )
    values: dict[int, list[int]] = defaultdict(list)
    rows = StageSample.objects.filter(
        pipeline_id=traces.pipeline.pk, start_ns__gte=traces.start_ns, start_ns__lt=traces.end_ns
    ).values_list("stage_id", "wall_ns")
    for stage_id, wall_ns in rows:
        values[stage_id].append(wall_ns)
    return {stage_id: _nearest_rank_values(v) for stage_id, v in values.items()}


def trace_percentiles(traces: TraceSet) -> tuple[list[float], list[float]] | None:
    """Nearest-rank p50..p99 of the end-to-end time and of the untracked critical time (ns)."""
    if connection.vendor == "postgresql":
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
    rows = list(traces.queryset().values_list("start_ns", "end_ns", "untracked_critical_ns"))
    if not rows:
        return None
    return (
        _nearest_rank_values([end - start for start, end, _ in rows]),
        _nearest_rank_values([untracked for _, _, untracked in rows]),
    )


def _over_budget(stages: Sequence[Stage]) -> Q | None:
    """Samples of any budgeted stage over its budget; None when no stage has a budget."""
    condition = None
    for stage in stages:
        if stage.budget_ms is not None:
            over = Q(stage_id=stage.pk, wall_ns__gt=stage.budget_ms * NS_PER_MS)
            condition = over if condition is None else condition | over
    return condition


def suggest_budgets(
    *,
    observed_ms: dict[int, float],
    critical_fraction: dict[int, float],
    budget_ms: int | None,
    untracked_ms: float,
) -> tuple[dict[int, int], float | None]:
    """Suggested budgets by stage id, and the scale applied to fit the end-to-end budget.

    Each stage first gets ``base = observed x (1 + HEADROOM)``: its observed
    percentile at its own budget percentile plus 10 %. A stage only spends the
    end-to-end budget for the part of its wall time that lies on the critical path,
    ``critical_fraction`` = sum of its critical-path time / sum of its wall time
    (1 for a sequential stage, near 0 for one always hidden behind a slower
    sibling). The critical-path demand is ``D = sum(critical_fraction x base)``;
    what the stages may spend is ``A = E - U``, the end-to-end budget E minus the
    untracked critical time U at the same percentile (orchestration no stage owns).
    Percentiles do not add, but budgets are allocated by adding them, as the
    allocation bar does. When ``D <= A`` the bases fit and stay as they are
    (scale 1). Otherwise every base is multiplied by ``k = A / D`` so that the
    critical-path budgets sum exactly to A: the stages share the cut in proportion
    to what they spend. When ``A <= 0`` nothing can fit; the bases are returned
    with scale None. Suggestions are whole milliseconds, at least 1.
    """
    bases = {stage_id: value * (1 + HEADROOM) for stage_id, value in observed_ms.items()}
    if budget_ms is None:
        return {stage_id: max(1, math.ceil(base)) for stage_id, base in bases.items()}, None
    available = budget_ms - untracked_ms
    demand = sum(critical_fraction.get(stage_id, 0.0) * base for stage_id, base in bases.items())
    if available <= 0:
        return {stage_id: max(1, math.ceil(base)) for stage_id, base in bases.items()}, None
    scale = min(1.0, available / demand) if demand > 0 else 1.0
    suggested = {
        stage_id: max(1, math.floor(base * scale) if scale < 1 else math.ceil(base))
        for stage_id, base in bases.items()
    }
    return suggested, scale


def pipeline_fit(*, pipeline: Pipeline, now: datetime | None = None) -> PipelineFit:
    now = now or timezone.now()
    start = now - PERIOD
    traces = TraceSet(
        pipeline, int(start.timestamp() * 1e9) // 1, int(now.timestamp() * 1e9) // 1
    )
    stages = list(Stage.objects.filter(pipeline=pipeline).order_by("position", "pk"))
    headline = pipeline.headline_budget
    over_any = _over_budget(stages)

    aggregates: dict[str, Count] = {"traces": Count("pk")}
    if headline is not None:
        e2e_over = Q(duration_ns__gt=headline[1] * NS_PER_MS)
        aggregates["over"] = Count("pk", filter=e2e_over)
        inconsistent = e2e_over
        if over_any is not None:
            inconsistent &= Q(stage_over=False)
        aggregates["inconsistent"] = Count("pk", filter=inconsistent)
    queryset = traces.queryset().annotate(duration_ns=F("end_ns") - F("start_ns"))
    if over_any is not None:
        samples = StageSample.objects.filter(
            over_any, trace_pk=OuterRef("pk"), start_ns=OuterRef("start_ns")
        )
        queryset = queryset.annotate(stage_over=Exists(samples))
    totals = queryset.aggregate(**aggregates)
    trace_count = totals["traces"]

    sample_rows = StageSample.objects.filter(
        pipeline_id=pipeline.pk, start_ns__gte=traces.start_ns, start_ns__lt=traces.end_ns
    ).values("stage_id")
    sample_aggregates = {
        "runs": Count("trace_pk"),
        "wall": Sum("wall_ns"),
        "critical": Sum("critical_ns"),
    }
    if over_any is not None:
        sample_aggregates["over"] = Count("trace_pk", filter=over_any)
    by_stage = {row["stage_id"]: row for row in sample_rows.annotate(**sample_aggregates)}
    percentiles = _stage_percentiles(pipeline, traces.start_ns, traces.end_ns)

    index = list(QUANTILES)
    observed = {
        stage.pk: percentiles[stage.pk][index.index(stage.budget_percentile)] / NS_PER_MS
        for stage in stages
        if stage.pk in percentiles
    }
    fraction = {
        stage_id: (row["critical"] or 0) / row["wall"] if row["wall"] else 0.0
        for stage_id, row in by_stage.items()
    }
    e2e_observed = untracked = None
    if headline is not None and trace_count:
        position = index.index(headline[0])
        durations = _trace_percentiles(traces, "end_ns - start_ns")
        untracked_values = _trace_percentiles(traces, "untracked_critical_ns")
        e2e_observed = durations[position] / NS_PER_MS if durations else None
        untracked = untracked_values[position] / NS_PER_MS if untracked_values else 0.0
    suggested, scale = suggest_budgets(
        observed_ms=observed,
        critical_fraction=fraction,
        budget_ms=headline[1] if headline else None,
        untracked_ms=untracked or 0.0,
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
                expected_share=round(1 - QUANTILES[stage.budget_percentile], 6),
                observed_ms=observed.get(stage.pk),
                critical_fraction=fraction.get(stage.pk) if runs else None,
                suggested_ms=suggested.get(stage.pk),
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
        expected_share=round(1 - QUANTILES[headline[0]], 6) if headline else None,
        inconsistent=totals.get("inconsistent"),
        share_inconsistent=_share(totals.get("inconsistent"), trace_count),
        untracked_ms=untracked,
        scale=scale,
        stages=stage_fits,
    )
