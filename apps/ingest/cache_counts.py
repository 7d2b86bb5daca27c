"""Counters in the shared cache, as ingestion's admission control keeps them.

Redis in production, so every web process counts against the same figures. An
unreachable cache (Redis restarting) costs the limits their shared counts, not the
clients their spans: callers admit the request and log a warning.
"""

import logging

from django.core.cache import cache

from apps.core.cached import CACHE_ERRORS
from apps.core.counters import counter_add

__all__ = ["CACHE_ERRORS", "cache_unreachable", "counter_add", "counter_give_back"]

logger = logging.getLogger(__name__)


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
