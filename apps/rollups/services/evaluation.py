"""Budget evaluation: window percentiles from 10 s and minute rollups, violations with hysteresis.

Every pass looks at each pipeline's budgets (each end-to-end percentile, each
stage's percentile of wall time) over the sliding window ``evaluation_window_s``
ending with the 10 s bucket that holds ``now``. A scope with fewer than
``min_samples`` values gets no verdict: its open violation neither advances nor
recovers. A violation opens when the percentile is over budget, follows the
latest and the peak value, and closes after ``close_after`` consecutive
evaluations back under budget.
"""

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.db import transaction
from django.db.models import Prefetch, Q
from django.utils import timezone

from apps.ingest.models import Trace
from apps.pipelines.models import Pipeline, Stage
from apps.rollups.models import (
    E2E_STAGE_ID,
    BudgetEvaluation,
    Measure,
    RollupBucket,
    StageSample,
    Violation,
)
from apps.rollups.services.fit import DURATION_NS
from apps.rollups.services.objectives import window_tiles
from apps.rollups.sketch import Sketch

EVALUATION_INTERVAL_S = 10
BUCKET_S = 10
WINDOW_RESOLUTIONS = (60, BUCKET_S)
EXAMPLES = 5
NS_PER_S = 1_000_000_000
QUANTILES = {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99}
_NEVER = datetime(1970, 1, 1, tzinfo=UTC)
# What every evaluation of an open violation changes, and what it may change.
_FOLLOWED = ["observed_ms", "sample_count", "last_evaluated_at", "consecutive_ok"]
_WRITTEN = [
    "observed_ms", "sample_count", "budget_ms", "window_s", "last_evaluated_at",
    "consecutive_ok", "peak_ms", "example_trace_ids", "closed_at",
]  # fmt: skip


@dataclass(frozen=True)
class Scope:
    """One budget to check: the end-to-end time (``stage`` None) or a stage's wall time."""

    stage: Stage | None
    percentile: str
    budget_ms: int

    @property
    def stage_id(self) -> int:
        return self.stage.pk if self.stage is not None else E2E_STAGE_ID

    @property
    def key(self) -> tuple[int | None, str]:
        return (self.stage.pk if self.stage is not None else None, self.percentile)


@dataclass(frozen=True)
class Window:
    """Buckets starting in [start, end): the evaluation window, whole 10 s buckets."""

    start: datetime
    end: datetime

    @property
    def start_ns(self) -> int:
        return int(self.start.timestamp()) * NS_PER_S

    @property
    def end_ns(self) -> int:
        return int(self.end.timestamp()) * NS_PER_S


@dataclass
class EvaluationResult:
    pipelines: int = 0
    skipped: int = 0
    opened: int = 0
    updated: int = 0
    closed: int = 0

    def add(self, other: "EvaluationResult") -> None:
        for name in ("pipelines", "skipped", "opened", "updated", "closed"):
            setattr(self, name, getattr(self, name) + getattr(other, name))


def evaluation_tick(now: datetime) -> datetime:
    """The start of the 10 s evaluation period holding ``now``: one evaluation per tick."""
    seconds = int(now.timestamp())
    return datetime.fromtimestamp(seconds - seconds % EVALUATION_INTERVAL_S, tz=UTC)


def evaluation_window(*, now: datetime, window_s: int) -> Window:
    end = evaluation_tick(now) + timedelta(seconds=BUCKET_S)
    return Window(start=end - timedelta(seconds=window_s), end=end)


def pipeline_scopes(pipeline: Pipeline, stages: Iterable[Stage]) -> list[Scope]:
    scopes = [Scope(None, percentile, ms) for percentile, ms in pipeline.budget.items()]
    scopes += [
        Scope(stage, stage.budget_percentile, stage.budget_ms)
        for stage in stages
        if stage.budget_ms is not None
    ]
    return scopes


def window_sketches(
    *, pipeline_id: int, stage_ids: Iterable[int], window: Window
) -> dict[int, Sketch]:
    """Wall-time sketches by stage id (E2E_STAGE_ID for end to end), merged over the window."""
    # Whole minutes inside the window come from minute buckets (written in the same
    # rollup pass as their 10 s children): a third of the sketches to decode.
    tiles = Q()
    for resolution, low, high in window_tiles(
        int(window.start.timestamp()), int(window.end.timestamp()), WINDOW_RESOLUTIONS
    ):
        tiles |= Q(
            resolution=resolution,
            bucket_start__gte=datetime.fromtimestamp(low, tz=UTC),
            bucket_start__lt=datetime.fromtimestamp(high, tz=UTC),
        )
    rows = RollupBucket.objects.filter(
        tiles, pipeline_id=pipeline_id, stage_id__in=list(stage_ids), measure=Measure.WALL
    ).values_list("stage_id", "sketch")
    parts: dict[int, list[Sketch]] = defaultdict(list)
    for stage_id, data in rows:
        parts[stage_id].append(Sketch.from_bytes(bytes(data)))
    return {stage_id: Sketch.merged(sketches) for stage_id, sketches in parts.items()}


def slowest_trace_ids(*, pipeline: Pipeline, scope: Scope, window: Window) -> list[str]:
    """Hex ids of the slowest traces of the window for a scope, slowest first."""
    if scope.stage is None:
        ids = (
            Trace.objects.filter(
                team_id=pipeline.team_id,
                pipeline_id=pipeline.pk,
                start_ns__gte=window.start_ns,
                start_ns__lt=window.end_ns,
                end_ns__isnull=False,
                finalized_at__isnull=False,
                incomplete=False,
            )
            .annotate(elapsed_ns=DURATION_NS)
            .order_by("-elapsed_ns", "pk")
            .values_list("trace_id", flat=True)[:EXAMPLES]
        )
        return [bytes(trace_id).hex() for trace_id in ids]
    trace_pks = list(
        StageSample.objects.filter(
            pipeline_id=pipeline.pk,
            stage_id=scope.stage.pk,
            start_ns__gte=window.start_ns,
            start_ns__lt=window.end_ns,
        )
        .order_by("-wall_ns", "trace_pk")
        .values_list("trace_pk", flat=True)[:EXAMPLES]
    )
    hex_ids = {
        pk: bytes(trace_id).hex()
        for pk, trace_id in Trace.objects.filter(pk__in=trace_pks).values_list("pk", "trace_id")
    }
    return [hex_ids[pk] for pk in trace_pks if pk in hex_ids]


def _claim(pipeline: Pipeline, tick: datetime) -> bool:
    """Move the pipeline's evaluation mark to ``tick``; False when this tick already ran.

    The conditional update waits for a concurrent evaluation of the same pipeline
    to commit and then matches no row, so the second run leaves without writing.
    """
    updated = BudgetEvaluation.objects.filter(pipeline=pipeline, evaluated_at__lt=tick).update(
        evaluated_at=tick
    )
    return updated == 1


@dataclass
class _Changes:
    """What one pipeline's evaluation writes, in one statement per kind."""

    opened: list[Violation] = field(default_factory=list)
    followed: list[Violation] = field(default_factory=list)
    reshaped: list[Violation] = field(default_factory=list)

    def add(self, violation: Violation, *, reshaped: bool) -> None:
        (self.reshaped if reshaped else self.followed).append(violation)


def _evaluate_scope(
    *,
    pipeline: Pipeline,
    scope: Scope,
    sketch: Sketch | None,
    violation: Violation | None,
    window: Window,
    now: datetime,
    changes: _Changes,
) -> None:
    count = sketch.count if sketch is not None else 0
    if sketch is None or count < pipeline.min_samples:
        return
    observed = sketch.quantile(QUANTILES[scope.percentile])
    assert observed is not None  # a sketch with samples has every quantile
    over = observed > scope.budget_ms
    if violation is None:
        if over:
            changes.opened.append(
                Violation(
                    team_id=pipeline.team_id,
                    pipeline=pipeline,
                    stage=scope.stage,
                    percentile=scope.percentile,
                    budget_ms=scope.budget_ms,
                    window_s=pipeline.evaluation_window_s,
                    observed_ms=observed,
                    peak_ms=observed,
                    sample_count=count,
                    opened_at=now,
                    last_evaluated_at=now,
                    example_trace_ids=slowest_trace_ids(
                        pipeline=pipeline, scope=scope, window=window
                    ),
                )
            )
        return
    reshaped = (violation.budget_ms, violation.window_s) != (
        scope.budget_ms,
        pipeline.evaluation_window_s,
    )
    if over:
        violation.consecutive_ok = 0
        if observed > violation.peak_ms:
            reshaped = True
            # The examples show the worst window seen, the one a reader wants to explain.
            violation.peak_ms = observed
            violation.example_trace_ids = slowest_trace_ids(
                pipeline=pipeline, scope=scope, window=window
            )
    else:
        violation.consecutive_ok += 1
        if violation.consecutive_ok >= pipeline.close_after:
            violation.closed_at = now
            reshaped = True
    violation.observed_ms = observed
    violation.sample_count = count
    violation.budget_ms = scope.budget_ms
    violation.window_s = pipeline.evaluation_window_s
    violation.last_evaluated_at = now
    changes.add(violation, reshaped=reshaped)


def pipeline_budgets_evaluate(
    *, pipeline: Pipeline, stages: Iterable[Stage], now: datetime
) -> EvaluationResult:
    """One evaluation of one pipeline at the tick of ``now``; a no-op if that tick ran."""
    result = EvaluationResult()
    scopes = pipeline_scopes(pipeline, stages)
    window = evaluation_window(now=now, window_s=pipeline.evaluation_window_s)
    with transaction.atomic():
        if not _claim(pipeline, evaluation_tick(now)):
            result.skipped = 1
            return result
        result.pipelines = 1
        sketches = window_sketches(
            pipeline_id=pipeline.pk, stage_ids={s.stage_id for s in scopes}, window=window
        )
        open_violations = {
            (v.stage_id, v.percentile): v
            for v in Violation.objects.filter(pipeline=pipeline, closed_at__isnull=True)
        }
        changes = _Changes()
        for scope in scopes:
            _evaluate_scope(
                pipeline=pipeline,
                scope=scope,
                sketch=sketches.get(scope.stage_id),
                violation=open_violations.pop(scope.key, None),
                window=window,
                now=now,
                changes=changes,
            )
        # A budget removed or moved to another percentile leaves nothing to recover from.
        for violation in open_violations.values():
            violation.closed_at = now
            changes.add(violation, reshaped=True)
        Violation.objects.bulk_create(changes.opened)
        # Most evaluations change four columns; bulk_update's cost grows with rows x fields.
        Violation.objects.bulk_update(changes.followed, _FOLLOWED)
        Violation.objects.bulk_update(changes.reshaped, _WRITTEN)
    result.opened = len(changes.opened)
    result.updated = len(changes.followed) + len(changes.reshaped)
    result.closed = sum(1 for v in changes.reshaped if v.closed_at is not None)
    return result


def budgets_evaluate(*, now: datetime | None = None) -> EvaluationResult:
    """Evaluate every pipeline's budgets once for the tick of ``now``; safe to run twice."""
    now = now or timezone.now()
    result = EvaluationResult()
    pipelines = list(
        Pipeline.objects.order_by("pk").prefetch_related(
            Prefetch("stages", queryset=Stage.objects.order_by("position", "pk"))
        )
    )
    BudgetEvaluation.objects.bulk_create(
        [BudgetEvaluation(pipeline=pipeline, evaluated_at=_NEVER) for pipeline in pipelines],
        ignore_conflicts=True,
    )
    for pipeline in pipelines:
        result.add(
            pipeline_budgets_evaluate(pipeline=pipeline, stages=pipeline.stages.all(), now=now)
        )
    return result
