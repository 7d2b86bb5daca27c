import time

from celery import shared_task
from django.db import transaction

from apps.analysis.services.finalize import traces_finalize_due
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
