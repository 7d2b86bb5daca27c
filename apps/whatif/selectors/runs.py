"""Reading runs and scenarios: waiting a little for a worker's answer, listing saved ones."""

import time

from django.db.models import QuerySet

from apps.pipelines.models import Pipeline
from apps.whatif.models import SavedScenario, WhatIfRun

FIRST_POLL_S = 0.05
LONGEST_POLL_S = 0.25


def whatif_run_wait(*, run: WhatIfRun, timeout: float) -> WhatIfRun:
    """The run as it is once a worker finished it, or after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    pause = FIRST_POLL_S
    while not run.is_finished and time.monotonic() < deadline:
        time.sleep(min(pause, max(deadline - time.monotonic(), 0)))
        pause = min(pause * 2, LONGEST_POLL_S)
        run.refresh_from_db(fields=["status", "result", "error", "finished_at", "started_at"])
    return run


def scenarios_for_pipeline(*, pipeline: Pipeline) -> QuerySet[SavedScenario]:
    return SavedScenario.objects.filter(pipeline=pipeline).order_by("name")
