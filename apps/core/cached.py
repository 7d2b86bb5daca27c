"""Figures that cost a scan of days of data, kept in the shared cache for a short time.

A page or API request that many members (or one script) repeat must not repeat the
scan each time: the answer of the last minute is as good. An unreachable cache (Redis
restarting) costs the computation, never the request.
"""

import contextlib
import logging
import math
import time
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
    return _store(key, seconds=seconds, value=compute())


def cached_once(key: str, *, seconds: int, compute: Callable[[], T], wait_s: float) -> T:
    """``cached_for``, computed by one request at a time across processes.

    Requests that miss while another computes the same key wait up to ``wait_s`` for
    its value instead of computing it too: many scrapers arriving at once cost one
    computation. Past the wait, or when the one computing failed, a request computes
    it itself.
    """
    lock = f"{key}:computing"
    try:
        value = cache.get(key, _MISSING)
        if value is not _MISSING:
            return value
        claimed = cache.add(lock, 1, timeout=max(1, math.ceil(wait_s)))
    except CACHE_ERRORS as exc:
        logger.warning("computing %s without the shared cache: %s", key, exc)
        return compute()
    if claimed:
        try:
            return _store(key, seconds=seconds, value=compute())
        finally:
            with contextlib.suppress(*CACHE_ERRORS):
                cache.delete(lock)
    found = _wait_for(key, lock=lock, wait_s=wait_s)
    if found is not _MISSING:
        return found  # type: ignore[return-value]  # what compute() stored under this key
    return cached_for(key, seconds=seconds, compute=compute)


def _wait_for(key: str, *, lock: str, wait_s: float) -> object:
    """The value another request is computing, or _MISSING once it gave up or ``wait_s``
    passed."""
    deadline = time.monotonic() + wait_s
    pause = 0.02
    while time.monotonic() < deadline:
        time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
        pause = min(pause * 2, 0.25)
        try:
            value = cache.get(key, _MISSING)
            if value is not _MISSING:
                return value
            if cache.get(lock) is None:
                return cache.get(key, _MISSING)  # stored just before the claim went
        except CACHE_ERRORS:
            return _MISSING
    return _MISSING


def _store(key: str, *, seconds: int, value: T) -> T:
    try:
        cache.set(key, value, timeout=seconds)
    except CACHE_ERRORS as exc:
        logger.warning("not keeping %s in the shared cache: %s", key, exc)
    return value
