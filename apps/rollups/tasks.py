import time

from celery import shared_task

from apps.rollups.services.finalize import traces_finalize_due

# Scheduled every second; a busy run keeps going for a while instead of waiting a beat.
FINALIZE_TIME_BUDGET_S = 5.0


@shared_task(name="apps.rollups.tasks.finalize_quiet_traces", ignore_result=True, expires=5)
def finalize_quiet_traces() -> None:
    deadline = time.monotonic() + FINALIZE_TIME_BUDGET_S
    while time.monotonic() < deadline:
        if not traces_finalize_due().traces:
            return
