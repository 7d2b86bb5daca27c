import logging
import time

from celery import shared_task
from django.conf import settings
from django.core.cache import cache

from apps.ingest.services.batches import raw_batches_drain
from apps.ingest.services.storage import storage_maintain

logger = logging.getLogger(__name__)

DRAIN_SCHEDULED_KEY = "ingest:drain-scheduled"
# One drain task keeps going for up to this long before handing over to a fresh one.
DRAIN_TIME_BUDGET_S = 20.0


def drain_schedule() -> None:
    """Enqueue a drain unless one was enqueued in the last second: coalesces requests."""
    if cache.add(DRAIN_SCHEDULED_KEY, 1, timeout=1):
        drain_raw_batches.delay()


@shared_task(name="apps.ingest.tasks.drain_raw_batches", ignore_result=True)
def drain_raw_batches() -> None:
    deadline = time.monotonic() + DRAIN_TIME_BUDGET_S
    while time.monotonic() < deadline:
        result = raw_batches_drain(max_spans=settings.INGEST_DRAIN_MAX_SPANS)
        if not result.more:
            return
        logger.info(
            "stored %d new spans from %d batches (%d traces)",
            result.spans_new,
            result.batches,
            result.traces_touched,
        )
    drain_raw_batches.delay()


@shared_task(name="apps.ingest.tasks.maintain_storage", ignore_result=True)
def maintain_storage() -> None:
    storage_maintain()
