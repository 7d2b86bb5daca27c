import time

from celery import shared_task
from django.core.cache import cache
from django.db import transaction

from apps.analysis.services.finalize import traces_finalize_due
from apps.analysis.services.recompute import (
    STALLED_AFTER_S,
    StepOutcome,
    recompute_step,
    recomputes_expire,
    recomputes_stalled,
)
from apps.analysis.signals import samples_committed

# Scheduled every second; a busy run keeps going until the next beat, no longer: the
# rollup passes its commits enqueue expire within two seconds, and a run holding its
# pool process for longer would leave the rollups of a busy pipeline stale.
FINALIZE_TIME_BUDGET_S = 1.0


def _samples_committed() -> None:
    samples_committed.send(sender=traces_finalize_due)


@shared_task(name="apps.analysis.tasks.finalize_quiet_traces", ignore_result=True, expires=5)
def finalize_quiet_traces() -> None:
    deadline = time.monotonic() + FINALIZE_TIME_BUDGET_S
    while time.monotonic() < deadline:
        result = traces_finalize_due()
        if result.samples:
            # Fresh samples reach the 10 s rollups, and the budgets, without waiting
            # for the rollup beat (the rollups app listens).
            transaction.on_commit(_samples_committed)
        if not result.traces:
            return


RECOMPUTE_SCHEDULED_KEY = "recompute:step-scheduled:{run_id}"
# While a recompute waits for the rollups of its pipeline, it looks again this often.
RECOMPUTE_WAIT_S = 2


def recompute_schedule(run_id: int, *, countdown: int = 0) -> None:
    """Queue the run's next step unless one is queued already: the request, each step
    and the safety net all ask, and a run has one step waiting at most."""
    key = RECOMPUTE_SCHEDULED_KEY.format(run_id=run_id)
    if cache.add(key, 1, timeout=countdown + STALLED_AFTER_S):
        recompute_pipeline.apply_async((run_id,), countdown=countdown)


# In the "whatif" queue (see CELERY_TASK_ROUTES): a step lasts about two seconds, then
# the next one queues behind every other team's replays and recomputes.
@shared_task(name="apps.analysis.tasks.recompute_pipeline", ignore_result=True)
def recompute_pipeline(run_id: int) -> None:
    cache.delete(RECOMPUTE_SCHEDULED_KEY.format(run_id=run_id))
    step = recompute_step(run_id=run_id)
    if step.traces:
        samples_committed.send(sender=recompute_step)
    if step.outcome == StepOutcome.MORE:
        recompute_schedule(run_id)
    elif step.outcome in (StepOutcome.WAIT, StepOutcome.BUSY):
        # BUSY: another worker holds the run, and carries it on; or one that just died
        # does, until the database ends its session. Looking again in a moment costs a
        # message, and the step queued by whichever comes first serves both.
        recompute_schedule(run_id, countdown=RECOMPUTE_WAIT_S)


@shared_task(name="apps.analysis.tasks.resume_recomputes", ignore_result=True, expires=30)
def resume_recomputes() -> None:
    recomputes_expire()
    for run_id in recomputes_stalled():
        recompute_schedule(run_id)
