"""Recompute: a pipeline's recent traces analysed again with its rules as they are now.

Rules apply to traces as they are analysed. After a change, the figures of the traces
analysed before it stay as the earlier rules made them, until a writer asks for the
last hours to be recomputed. A worker then reads the window's stored spans again and
runs them through the same analysis as finalization (``trace_analysis``):
stage samples replaced, never added to; the rollup buckets they count in marked dirty,
which the rollup passes rebuild.

Costs are bounded the way analysis bounds them. One recompute per account is queued
or running at a time; it works in batches of at most ``ANALYSIS_PASS_MAX_SPANS`` spans
and ``ANALYSIS_PASS_MAX_BYTES`` bytes, in steps of ``STEP_TIME_BUDGET_S`` on the
``whatif`` queue, each step queued behind everyone else's work; and it waits while
its pipeline has more than ``MAX_PENDING_BUCKETS`` buckets for the rollups to rewrite,
so the shared rollup pass is never buried under one team's history.

Crash safety: a step holds the recompute by a session lock (one worker at a time); a
batch commits the traces' new samples, the counts and the position reached together,
so a worker killed mid-batch leaves that batch to redo and nothing counted twice. The
batch's traces are claimed first (``crash_guard``): after a worker died on them they
are worked on one by one, and one that keeps killing workers is quarantined.
"""

import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from functools import partial
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import F, Q, QuerySet
from django.utils import timezone

from apps.analysis.models import (
    RECOMPUTE_IN_FLIGHT,
    DirtyBucket,
    Recompute,
    RecomputeStatus,
)
from apps.analysis.services.trace_analysis import Analyzed, TraceAnalysis, analysis_result
from apps.analysis.spans import Span
from apps.core.isolated_pass import Candidate, PassOutcome, pass_run
from apps.core.isolation import failure_reason, is_transient
from apps.core.models import PassKind
from apps.core.session_lock import RECOMPUTE_LOCKS, session_lock
from apps.core.time import datetime_to_ns
from apps.ingest.models import ANALYZED_STATES, Trace
from apps.ingest.services.storage import spans_kept_since
from apps.pipelines.models import Pipeline
from apps.teams.accounts import account_lock, account_teams

logger = logging.getLogger(__name__)

KIND = PassKind.RECOMPUTE
HOURS_OFFERED = (1, 3, 6, 12, 24, 48, 72, 168)
# Traces one batch looks at, before the span and byte budgets of analysis passes.
BATCH_TRACES = 2000
# A step's time, then the next step queues behind everyone else's work.
STEP_TIME_BUDGET_S = 2.0
# Dirty buckets of the pipeline past which the recompute waits for the rollups.
MAX_PENDING_BUCKETS = 2000
# A run in flight without progress for this long is handed to a worker again.
STALLED_AFTER_S = 60
# Finished runs are kept while traces of their window may still be kept.
KEEP_DAYS_AFTER = 1


def recompute_hours_offered() -> list[int]:
    """The windows a recompute may ask for: the usual ones up to ``RECOMPUTE_MAX_HOURS``,
    and that cap itself."""
    cap = settings.RECOMPUTE_MAX_HOURS
    return sorted({hours for hours in HOURS_OFFERED if hours <= cap} | {cap})


def recompute_hours_clean(hours: object) -> int:
    """The form's, the API's and the service's one check of the hours asked for."""
    offered = recompute_hours_offered()
    if type(hours) is not int or hours not in offered:
        listed = ", ".join(str(h) for h in offered)
        raise ValidationError(
            {"hours": [f"Choose one of {listed} hours (RECOMPUTE_MAX_HOURS caps it)."]},
            code="invalid_hours",
        )
    return hours


class RecomputeBusy(Exception):
    """Another recompute of the account is queued or running; the message says which."""

    def __init__(self, message: str, running: Recompute) -> None:
        super().__init__(message)
        self.running = running


@dataclass(frozen=True)
class RecomputeRequested:
    run: Recompute
    joined: bool  # the run was already going; this request joined it


def _hours(hours: int) -> str:
    return f"{hours} hour" if hours == 1 else f"{hours} hours"


def _busy(running: Recompute, pipeline: Pipeline, hours: int) -> RecomputeBusy:
    progress = f"{running.handled} of {running.total} traces done"
    if running.status == RecomputeStatus.QUEUED:
        progress = "waiting for a worker"
    if running.pipeline_id == pipeline.pk:
        message = (
            f"This pipeline's last {_hours(running.hours)} are being recomputed ({progress}); "
            f"ask for {_hours(hours)} once that has finished."
        )
    elif running.team_id == pipeline.team_id:
        message = (
            f"“{running.pipeline.name}” is being recomputed ({progress}); one recompute runs "
            "at a time for the teams of an account. Ask again once it has finished."
        )
    else:  # another team of the account: its names are not this team's to read
        message = (
            "A pipeline of another team of this account is being recomputed; one recompute "
            "runs at a time for the teams of an account. Ask again once it has finished."
        )
    return RecomputeBusy(message, running)


def recompute_request(
    *, pipeline: Pipeline, hours: int, user: User | None, now: datetime | None = None
) -> RecomputeRequested:
    """Recompute the pipeline's traces that started in the last ``hours``.

    Queued for a worker, and returned at once. While the account has a recompute in
    flight, asking for the same pipeline and no more hours joins it; anything else
    raises ``RecomputeBusy``. The window starts no earlier than the oldest spans kept.
    """
    hours = recompute_hours_clean(hours)
    now = now or timezone.now()
    with transaction.atomic():
        account_lock(team=pipeline.team)  # two requests never both find the account idle
        running = (
            Recompute.objects.filter(
                team__in=account_teams(team=pipeline.team), status__in=RECOMPUTE_IN_FLIGHT
            )
            .select_related("pipeline")
            .order_by("created_at")
            .first()
        )
        if running is not None:
            if running.pipeline_id == pipeline.pk and running.hours >= hours:
                return RecomputeRequested(running, joined=True)
            raise _busy(running, pipeline, hours)
        run = Recompute.objects.create(
            team_id=pipeline.team_id,
            pipeline=pipeline,
            requested_by=user,
            hours=hours,
            window_start=max(now - timedelta(hours=hours), spans_kept_since(now)),
            window_end=now,
            created_at=now,
            progressed_at=now,
        )
        transaction.on_commit(partial(_enqueue, run.pk))
    return RecomputeRequested(run, joined=False)


def _enqueue(run_id: int) -> None:
    from apps.analysis.tasks import recompute_schedule

    recompute_schedule(run_id)


class StepOutcome(StrEnum):
    MORE = "more"  # time is up: the next step goes on
    WAIT = "wait"  # the rollups are behind: the next step goes on in a moment
    FINISHED = "finished"
    FAILED = "failed"
    BUSY = "busy"  # another worker holds the run
    GONE = "gone"  # no such run in flight (finished, or its pipeline deleted)


@dataclass(frozen=True)
class StepResult:
    outcome: StepOutcome
    traces: int = 0  # analysed again in this step


def recompute_step(*, run_id: int, time_budget_s: float = STEP_TIME_BUDGET_S) -> StepResult:
    """Work on the run for about ``time_budget_s``, batch after batch.

    Idempotent: a second delivery while a worker holds the run returns BUSY, one after
    the run ended returns GONE. Use outside a transaction.
    """
    with session_lock(RECOMPUTE_LOCKS, run_id) as held:
        if not held:
            return StepResult(StepOutcome.BUSY)
        run = Recompute.objects.filter(pk=run_id, status__in=RECOMPUTE_IN_FLIGHT).first()
        if run is None:
            return StepResult(StepOutcome.GONE)
        if run.status == RecomputeStatus.QUEUED:
            _start(run)
        deadline = time.monotonic() + time_budget_s
        analysed = 0
        while True:
            if _rollups_behind(run):
                return StepResult(StepOutcome.WAIT, analysed)
            try:
                batch = _batch(run)
            except Exception as exc:
                if is_transient(exc):
                    raise
                logger.warning("recompute %s failed", run.pk, exc_info=True)
                _end(run, RecomputeStatus.FAILED, error=failure_reason(exc))
                return StepResult(StepOutcome.FAILED, analysed)
            if batch is None:
                # Traces counted at the start that left the window's analysed traces
                # since (new spans opened them again) were not reached: left to finalization.
                run.refresh_from_db()
                _end(run, RecomputeStatus.FINISHED, skipped=max(0, run.total - run.handled))
                return StepResult(StepOutcome.FINISHED, analysed)
            analysed += batch
            try:
                run.refresh_from_db()
            except Recompute.DoesNotExist:  # its pipeline was deleted meanwhile
                return StepResult(StepOutcome.GONE, analysed)
            if time.monotonic() >= deadline:
                return StepResult(StepOutcome.MORE, analysed)


def _remaining(run: Recompute) -> QuerySet[Trace]:
    """The window's analysed traces still held by the pipeline, after the position reached."""
    traces = Trace.objects.filter(
        team_id=run.team_id,
        pipeline_id=run.pipeline_id,
        start_ns__gte=datetime_to_ns(run.window_start),
        start_ns__lt=datetime_to_ns(run.window_end),
        state__in=ANALYZED_STATES,
    )
    if run.cursor_start_ns is not None:
        traces = traces.filter(
            Q(start_ns__gt=run.cursor_start_ns)
            | Q(start_ns=run.cursor_start_ns, pk__gt=run.cursor_trace_pk)
        )
    return traces.order_by("start_ns", "pk")


def _start(run: Recompute) -> None:
    now = timezone.now()
    total = _remaining(run).count()
    Recompute.objects.filter(pk=run.pk, status=RecomputeStatus.QUEUED).update(
        status=RecomputeStatus.RUNNING, started_at=now, progressed_at=now, total=total
    )
    run.refresh_from_db()


def _end(run: Recompute, status: RecomputeStatus, *, error: str = "", skipped: int = 0) -> None:
    Recompute.objects.filter(pk=run.pk, status__in=RECOMPUTE_IN_FLIGHT).update(
        status=status,
        finished_at=timezone.now(),
        error=error[:2000],
        skipped=F("skipped") + skipped,
    )


def _rollups_behind(run: Recompute) -> bool:
    pending = DirtyBucket.objects.filter(pipeline_id=run.pipeline_id, quarantined_at__isnull=True)
    return pending[: MAX_PENDING_BUCKETS + 1].count() > MAX_PENDING_BUCKETS


class RecomputeBatch(TraceAnalysis):
    """The next traces of the run's window, in its order, analysed again; the run's
    position and counts move past them in the same transaction."""

    kind = KIND
    in_order = True

    def __init__(self, run: Recompute, *, now: datetime) -> None:
        super().__init__(now=now)
        self.run = run
        self.starts: dict[int, int] = {}

    def waiting(self) -> QuerySet[Trace]:
        return _remaining(self.run)

    def candidates(self, due: QuerySet[Any]) -> Iterable[Candidate]:
        rows = due.values_list("pk", "start_ns", "span_count", "byte_count")[:BATCH_TRACES]
        # Every trace of the window has a start: it is selected by it.
        self.starts = {pk: start or 0 for pk, start, _, _ in rows}
        return [(pk, spans, size) for pk, _, spans, size in rows]

    def begin(self, items: list[Trace]) -> list[Trace]:
        # Still the pipeline's and analysed: new spans since make a trace open again, and
        # finalization analyses it with the rules of now anyway. One whose spans expired
        # since is left as it is.
        super().begin(items)
        return [t for t in items if _root_stored(t, self.spans.get(t.pk, []))]

    def finish(self, outcome: PassOutcome[Trace, Sequence[Analyzed]]) -> None:
        # F() updates, read back once committed: a batch rolled back and redone item by
        # item must not count twice.
        last = outcome.claimed[-1]
        Recompute.objects.filter(pk=self.run.pk).update(
            cursor_start_ns=self.starts[last],
            cursor_trace_pk=last,
            done=F("done") + analysis_result(outcome).traces,
            failed=F("failed") + len(outcome.quarantined),
            skipped=F("skipped") + len(outcome.claimed) - outcome.locked,
            expired=F("expired") + outcome.locked - outcome.worked,
            progressed_at=timezone.now(),
        )


def _batch(run: Recompute) -> int | None:
    """Analyse the next batch of the window again; the traces analysed, None when done.

    A batch holding a trace died with its worker: it goes alone, or is set aside.
    """
    outcome = pass_run(RecomputeBatch(run, now=timezone.now()))
    if not outcome.claimed:
        return None
    return analysis_result(outcome).traces


def _root_stored(trace: Trace, spans: list[Span]) -> bool:
    """Whether the trace's spans are still stored: at least its root's, when it has one."""
    if not spans:
        return False
    if trace.root_span_id is None:
        return True
    root = bytes(trace.root_span_id).hex()
    return any(span.span_id == root for span in spans)


def recomputes_expire(*, now: datetime | None = None) -> int:
    """Delete finished runs older than the traces of their window; the number deleted."""
    now = now or timezone.now()
    keep = timedelta(days=settings.SAMPLE_RETENTION_DAYS + KEEP_DAYS_AFTER)
    return Recompute.objects.filter(finished_at__lt=now - keep).delete()[0]


def recomputes_stalled(*, now: datetime | None = None) -> list[int]:
    """Runs in flight without progress for ``STALLED_AFTER_S``: their worker died, or
    their next step was lost."""
    now = now or timezone.now()
    stalled = Recompute.objects.filter(
        status__in=RECOMPUTE_IN_FLIGHT,
        progressed_at__lt=now - timedelta(seconds=STALLED_AFTER_S),
    )
    return list(stalled.order_by("progressed_at").values_list("pk", flat=True)[:1000])
