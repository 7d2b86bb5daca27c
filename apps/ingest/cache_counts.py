"""Counters in the shared cache, as ingestion's admission control keeps them.

Redis in production, so every web process counts against the same figures. An
unreachable cache (Redis restarting) costs the limits their shared counts, not the
clients their spans: callers admit the request and log a warning.
"""

import logging

from django.core.cache import cache
from redis.exceptions import RedisError

logger = logging.getLogger(__name__)

CACHE_ERRORS = (RedisError, OSError)


def counter_add(key: str, amount: int, *, ttl_s: int) -> int:
    """Add to a counter and return its new value; a new counter expires after ``ttl_s``."""
    # add() creates the counter with its expiry only if it is absent (SET NX), and
    # incr() is atomic, so concurrent requests in any process never lose a count.
    for _ in range(2):
        cache.add(key, 0, timeout=ttl_s)
        try:
            return cache.incr(key, amount)
        except ValueError:  # expired between the two calls
            continue
    return cache.incr(key, amount)


def counter_give_back(key: str, amount: int) -> None:
    """Take back what was added for a request that was refused or not stored after all."""
    try:
        cache.decr(key, amount)
    except ValueError:  # the counter expired meanwhile: nothing left to give back
        pass
    except CACHE_ERRORS as exc:
        cache_unreachable(exc)


def cache_unreachable(exc: BaseException) -> None:
    logger.warning("ingest admission without the shared cache: %s", exc)
