"""Figures that cost a scan of days of data, kept in the shared cache for a short time.

A page or API request that many members (or one script) repeat must not repeat the
scan each time: the answer of the last minute is as good. An unreachable cache (Redis
restarting) costs the computation, never the request.
"""

import logging
from collections.abc import Callable
from typing import TypeVar

from django.core.cache import cache
from redis.exceptions import RedisError

T = TypeVar("T")
logger = logging.getLogger(__name__)
CACHE_ERRORS = (RedisError, OSError)
_MISSING = object()


def cached_for(key: str, *, seconds: int, compute: Callable[[], T]) -> T:
    """``compute()``, or its value from the last ``seconds`` under ``key``."""
    try:
        value = cache.get(key, _MISSING)
    except CACHE_ERRORS as exc:
        logger.warning("computing %s without the shared cache: %s", key, exc)
        return compute()
    if value is not _MISSING:
        return value  # what compute() stored under this key
    value = compute()
    try:
        cache.set(key, value, timeout=seconds)
    except CACHE_ERRORS as exc:
        logger.warning("not keeping %s in the shared cache: %s", key, exc)
    return value
