"""Budget evaluation: violations open, follow their scope and close with hysteresis.

Two kinds of evaluation read the same window (see ``budget_window``):

The regular tick, every 10 s over every pipeline, gives each scope its verdict. A
scope with fewer than ``min_samples`` values gets none: its open violation neither
advances nor recovers. A violation opens when the percentile is over budget,
follows the latest and the peak value, and closes after ``close_after``
consecutive ticks back under budget.

A prompt check runs between ticks, right after a rollup pass rewrote a pipeline's
10 s buckets, so that a budget broken by fresh data opens its violation without
waiting for the next tick. It only acts on scopes over budget: it opens their
violation, or follows an open one (latest and peak value, and the count of ticks
under budget back to zero, since the budget is broken again). A scope under budget
is left to the tick: a prompt check never counts toward closing, never closes, and
never moves the tick's mark, so the hysteresis means ``close_after`` ticks whatever
the rollup traffic.
"""

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial

from django.core.cache import cache
from django.db import transaction
from django.db.models import Prefetch, QuerySet
from django.utils import timezone

from apps.core.isolated_pass import item_alone
from apps.core.isolation import failure_reason, pass_statement_timeout
from apps.core.models import QuarantineKind
from apps.core.percentiles import QUANTILES
from apps.core.quarantine import quarantine_record
from apps.pipelines.models import Pipeline, Stage
from apps.rollups.models import BudgetEvaluation, Measure, Violation
from apps.rollups.selectors.budget_window import (
    EvaluationWindow,
    Scope,
    evaluation_tick,
    evaluation_window,
    pipeline_scopes,
    slowest_trace_ids,
    stream_sketches,
    window_sketches,
)
from apps.rollups.signals import violations_changed
from apps.rollups.sketches.ddsketch import Sketch

logger = logging.getLogger(__name__)

# One prompt check per pipeline per period this long: with steady traffic a rollup
# pass follows each second's finalize pass, so a pipeline is checked after every one
# of them, and no more often however many passes or workers there are.
PROMPT_CHECK_INTERVAL_S = 1
_NEVER = datetime(1970, 1, 1, tzinfo=UTC)
# What every evaluation of an open violation changes, and what it may change.
_FOLLOWED = ["observed_ms", "sample_count", "last_evaluated_at", "consecutive_ok"]
_WRITTEN = [
    "observed_ms", "sample_count", "budget_ms", "window_s", "last_evaluated_at",
    "consecutive_ok", "peak_ms", "example_trace_ids", "closed_at",
]  # fmt: skip


@dataclass
class EvaluationResult:
    pipelines: int = 0
    skipped: int = 0
    opened: int = 0
    updated: int = 0
    closed: int = 0
    quarantined: int = 0

    def add(self, other: "EvaluationResult") -> None:
        for name in ("pipelines", "skipped", "opened", "updated", "closed", "quarantined"):
            setattr(self, name, getattr(self, name) + getattr(other, name))


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
    window: EvaluationWindow,
    now: datetime,
    tick: bool,
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
                    measure=scope.measure,
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
    if not over and not tick:
        return  # recovery is counted by the tick alone
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


def _evaluate(
    *, pipeline: Pipeline, stages: Iterable[Stage], now: datetime, tick: bool
) -> EvaluationResult:
    """Evaluate and write; the caller holds the pipeline's BudgetEvaluation row."""
    scopes = pipeline_scopes(pipeline, stages)
    window = evaluation_window(now=now, window_s=pipeline.evaluation_window_s)
    walls = {s.stage_id for s in scopes if s.measure == Measure.WALL}
    sketches = window_sketches(pipeline_id=pipeline.pk, stage_ids=walls, window=window)
    streams = stream_sketches(
        pipeline_id=pipeline.pk,
        stage_ids={s.stage_id for s in scopes if s.measure != Measure.WALL},
        window=window,
    )
    open_violations = {
        (v.stage_id, v.measure, v.percentile): v
        for v in Violation.objects.filter(pipeline=pipeline, closed_at__isnull=True)
    }
    changes = _Changes()
    for scope in scopes:
        _evaluate_scope(
            pipeline=pipeline,
            scope=scope,
            sketch=(
                sketches.get(scope.stage_id)
                if scope.measure == Measure.WALL
                else streams.get((scope.stage_id, scope.measure))
            ),
            violation=open_violations.pop(scope.key, None),
            window=window,
            now=now,
            tick=tick,
            changes=changes,
        )
    if tick:
        # A budget removed or moved to another percentile leaves nothing to recover from.
        for violation in open_violations.values():
            violation.closed_at = now
            changes.add(violation, reshaped=True)
    Violation.objects.bulk_create(changes.opened)
    # Most evaluations change four columns; bulk_update's cost grows with rows x fields.
    Violation.objects.bulk_update(changes.followed, _FOLLOWED)
    Violation.objects.bulk_update(changes.reshaped, _WRITTEN)
    closed = sum(1 for v in changes.reshaped if v.closed_at is not None)
    if changes.opened or closed:
        transaction.on_commit(
            partial(violations_changed.send, sender=Violation, pipeline_ids=[pipeline.pk])
        )
    return EvaluationResult(
        pipelines=1,
        opened=len(changes.opened),
        updated=len(changes.followed) + len(changes.reshaped),
        closed=closed,
    )


def _claim(pipeline: Pipeline, tick: datetime) -> bool:
    """Move the pipeline's evaluation mark to ``tick``; False when this tick already ran.

    The conditional update waits for a concurrent evaluation of the same pipeline
    to commit and then matches no row, so the second run leaves without writing.
    """
    updated = BudgetEvaluation.objects.filter(pipeline=pipeline, evaluated_at__lt=tick).update(
        evaluated_at=tick
    )
    return updated == 1


def _marks_create(pipelines: Iterable[Pipeline]) -> None:
    BudgetEvaluation.objects.bulk_create(
        [BudgetEvaluation(pipeline=pipeline, evaluated_at=_NEVER) for pipeline in pipelines],
        ignore_conflicts=True,
    )


def _with_stages(pipelines: QuerySet[Pipeline]) -> list[Pipeline]:
    return list(
        pipelines.order_by("pk").prefetch_related(
            Prefetch("stages", queryset=Stage.objects.order_by("position", "pk"))
        )
    )


def pipeline_budgets_evaluate(
    *, pipeline: Pipeline, stages: Iterable[Stage], now: datetime
) -> EvaluationResult:
    """One evaluation of one pipeline at the tick of ``now``; a no-op if that tick ran."""
    with transaction.atomic():
        if not _claim(pipeline, evaluation_tick(now)):
            return EvaluationResult(skipped=1)
        pass_statement_timeout()
        return _evaluate(pipeline=pipeline, stages=stages, now=now, tick=True)


def _isolated(pipeline: Pipeline, evaluate: Callable[[], EvaluationResult]) -> EvaluationResult:
    """One pipeline's evaluation; a failure quarantines it instead of ending the pass."""

    def quarantine(exc: BaseException) -> EvaluationResult:
        reason = failure_reason(exc)
        logger.warning("evaluation of pipeline %s quarantined: %s", pipeline.pk, reason)
        BudgetEvaluation.objects.filter(pipeline=pipeline).update(quarantined_at=timezone.now())
        quarantine_record(
            kind=QuarantineKind.EVALUATION,
            item_id=pipeline.pk,
            team_id=pipeline.team_id,
            reason=reason,
        )
        return EvaluationResult(quarantined=1)

    return item_alone(evaluate, on_failure=quarantine)


def _evaluated(pipelines: QuerySet[Pipeline]) -> QuerySet[Pipeline]:
    """The pipelines whose evaluation is not quarantined (a new one has no mark yet)."""
    held = BudgetEvaluation.objects.filter(quarantined_at__isnull=False).values("pipeline_id")
    return pipelines.exclude(pk__in=held)


def budget_evaluations_release(pipeline_ids: list[int]) -> int:
    """Put quarantined pipelines back into evaluation."""
    return BudgetEvaluation.objects.filter(pipeline_id__in=pipeline_ids).update(quarantined_at=None)


def budgets_evaluate(*, now: datetime | None = None) -> EvaluationResult:
    """Evaluate every pipeline's budgets once for the tick of ``now``; safe to run twice."""
    now = now or timezone.now()
    result = EvaluationResult()
    pipelines = _with_stages(_evaluated(Pipeline.objects.all()))
    _marks_create(pipelines)
    for pipeline in pipelines:
        result.add(
            _isolated(
                pipeline,
                partial(
                    pipeline_budgets_evaluate,
                    pipeline=pipeline,
                    stages=pipeline.stages.all(),
                    now=now,
                ),
            )
        )
    return result


def _prompt_check_due(pipeline_id: int, now: datetime) -> bool:
    """Claim the pipeline's prompt check for the period holding ``now``; False if taken.

    The period is named after ``now``, not the clock, and the key outlives it; add()
    is atomic, so any number of workers check a pipeline once per period.
    """
    period = int(now.timestamp()) // PROMPT_CHECK_INTERVAL_S
    key = f"budgets:prompt-check:{pipeline_id}:{period}"
    return cache.add(key, 1, timeout=2 * PROMPT_CHECK_INTERVAL_S)


def budgets_check_promptly(
    *, pipeline_ids: Iterable[int], now: datetime | None = None
) -> EvaluationResult:
    """Open (or follow) the violations of these pipelines' budgets broken now, between ticks.

    For the pipelines whose rollups just changed; one already checked in the current
    ``PROMPT_CHECK_INTERVAL_S`` period is skipped. Never closes and never counts
    toward closing (see the module's docstring).
    """
    now = now or timezone.now()
    ids = sorted(set(pipeline_ids))
    due = [pipeline_id for pipeline_id in ids if _prompt_check_due(pipeline_id, now)]
    result = EvaluationResult(skipped=len(ids) - len(due))
    if not due:
        return result
    pipelines = _with_stages(_evaluated(Pipeline.objects.filter(pk__in=due)))
    _marks_create(pipelines)
    for pipeline in pipelines:
        result.add(_isolated(pipeline, partial(_check_promptly, pipeline=pipeline, now=now)))
    return result


def _check_promptly(*, pipeline: Pipeline, now: datetime) -> EvaluationResult:
    with transaction.atomic():
        # The tick's row lock: a check and a tick of one pipeline take turns, each
        # reading the violations the other wrote. No row: deleted meanwhile.
        mark = BudgetEvaluation.objects.select_for_update().filter(pipeline=pipeline)
        if not mark.values_list("pk", flat=True):
            return EvaluationResult()
        pass_statement_timeout()
        return _evaluate(pipeline=pipeline, stages=pipeline.stages.all(), now=now, tick=False)
