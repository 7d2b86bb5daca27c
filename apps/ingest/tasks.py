import logging
import time

from celery import shared_task
from django.conf import settings
from django.core.cache import cache
from kombu.exceptions import OperationalError
from redis.exceptions import RedisError

from apps.ingest.services.batches import raw_batches_drain, raw_batches_pending
from apps.ingest.services.storage import storage_maintain

logger = logging.getLogger(__name__)

DRAIN_SCHEDULED_KEY = "ingest:drain-scheduled"
# One drain task keeps going for up to this long before handing over to a fresh one.
DRAIN_TIME_BUDGET_S = 20.0
# Drains running at once hold a lease each. One drain stores tens of thousands of spans
# a second (the database is the limit), and a drain running in every pool process
# would leave none for finalizing traces; INGEST_DRAIN_CONCURRENCY raises it.
DRAIN_LEASE_KEY = "ingest:drain-lease:{slot}"
# A drain killed without releasing its lease blocks its slot this long at most.
DRAIN_LEASE_S = 30
# A pass that found fewer spans than this waits a moment before the next one, so that
# passes carry thousands of spans instead of spinning over one request at a time.
DRAIN_GATHER_SPANS = 4096
DRAIN_GATHER_S = 0.2


def drain_schedule() -> None:
    """Enqueue a drain unless one was enqueued in the last second: coalesces requests.

    With the cache or the broker away the batch is committed all the same, and the
    periodic drain takes it: a warning, not a traceback per request.
    """
    try:
        if cache.add(DRAIN_SCHEDULED_KEY, 1, timeout=1):
            drain_raw_batches.delay()
    except (RedisError, OSError, OperationalError) as exc:
        logger.warning("drain not scheduled (%s); the periodic drain will store the batch", exc)


def _lease() -> str | None:
    for slot in range(settings.INGEST_DRAIN_CONCURRENCY):  # at least 1, checked by settings
        key = DRAIN_LEASE_KEY.format(slot=slot)
        if cache.add(key, 1, timeout=DRAIN_LEASE_S):
            return key
    return None


@shared_task(name="apps.ingest.tasks.drain_raw_batches", ignore_result=True)
def drain_raw_batches() -> None:
    lease = _lease()
    if lease is None:
        return  # the running drains take these batches too
    deadline = time.monotonic() + DRAIN_TIME_BUDGET_S
    try:
        while time.monotonic() < deadline:
            cache.touch(lease, DRAIN_LEASE_S)
            result = raw_batches_drain(max_spans=settings.INGEST_DRAIN_MAX_SPANS)
            if not result.more:
                break
            logger.info(
                "stored %d new spans from %d batches (%d traces)",
                result.spans_new,
                result.batches,
                result.traces_touched,
            )
            if result.spans_received < DRAIN_GATHER_SPANS:
                time.sleep(DRAIN_GATHER_S)
    finally:
        cache.delete(lease)
    # Batches committed while the lease was being given up found it taken: look again.
    if raw_batches_pending():
        drain_raw_batches.delay()


@shared_task(name="apps.ingest.tasks.maintain_storage", ignore_result=True)
def maintain_storage() -> None:
    storage_maintain()
