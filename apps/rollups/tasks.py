import time
from functools import partial

from celery import shared_task
from django.conf import settings
from django.core.cache import cache
from django.db import transaction

from apps.rollups.selectors.budget_window import BUCKET_S, EVALUATION_INTERVAL_S
from apps.rollups.services.bucket_pass import rollups_process_dirty
from apps.rollups.services.evaluation import budgets_check_promptly, budgets_evaluate
from apps.rollups.services.retention import rollups_expire

ROLLUP_SCHEDULED_KEY = "rollups:pass-scheduled:{second}"


def rollup_pass_schedule(**_signal: object) -> None:
    """Enqueue a rollup pass unless one was enqueued in this second: coalesces requests.

    The claim is named after the second, not held for a second from the last one: a
    finalize run each beat, committing a little sooner than the previous one, still
    gets its pass instead of leaving its samples to the rollup beat.
    """
    if cache.add(ROLLUP_SCHEDULED_KEY.format(second=int(time.time())), 1, timeout=2):
        process_dirty_rollups.delay()


# Enqueued after a finalize pass that wrote samples (at most once a second), and
# scheduled every 2 s as a safety net: buckets marked dirty without new samples, or
# in a second that already had its pass, wait a beat at most. A busy run keeps going;
# the passes queued meanwhile expire unrun. Each pass that rewrote 10 s buckets has
# their pipelines' budgets checked by a task of its own, which another worker may
# take at once, instead of adding to this run's time. A 10 s bucket first marked less
# than ROLLUP_SETTLE_SECONDS ago is left to a later pass, which then reads its samples
# once for what several passes would have read again and again.
ROLLUP_TIME_BUDGET_S = 5.0


@shared_task(name="apps.rollups.tasks.process_dirty_rollups", ignore_result=True, expires=2)
def process_dirty_rollups() -> None:
    deadline = time.monotonic() + ROLLUP_TIME_BUDGET_S
    while time.monotonic() < deadline:
        result = rollups_process_dirty(settle_s=settings.ROLLUP_SETTLE_SECONDS)
        if changed := result.pipelines.get(BUCKET_S):
            transaction.on_commit(partial(check_budgets_promptly.delay, sorted(changed)))
        if not result.buckets:
            return


# Between two ticks, so that a broken budget opens its violation without waiting for
# the next one. Still queued 10 s later, it expires unrun: a tick has read the same
# rollups by then.
@shared_task(
    name="apps.rollups.tasks.check_budgets_promptly",
    ignore_result=True,
    expires=EVALUATION_INTERVAL_S,
)
def check_budgets_promptly(pipeline_ids: list[int]) -> None:
    budgets_check_promptly(pipeline_ids=pipeline_ids)


@shared_task(name="apps.rollups.tasks.expire_rollups", ignore_result=True, expires=300)
def expire_rollups() -> None:
    rollups_expire()


# Scheduled every 10 s. Runs of one 10 s tick count once (see budgets_evaluate), and a
# beat left queued past the next one expires unrun.
@shared_task(name="apps.rollups.tasks.evaluate_budgets", ignore_result=True, expires=10)
def evaluate_budgets() -> None:
    budgets_evaluate()
