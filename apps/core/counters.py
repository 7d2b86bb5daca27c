"""Counters over fixed windows in the shared cache: the allowances of the API, sign-ups
and invitations.

Redis in production, so every web process counts against the same window. A fixed
window is coarse (an abuser gets at most twice the allowance across a boundary) but
costs one round trip, and a legitimate client never waits longer than the rest of it.
"""

import contextlib
import math
import time

from django.core.cache import cache


def window_consume(
    key: str, *, limit: int, window_s: int, now: float | None = None, amount: int = 1
) -> int:
    """Count ``amount`` uses of ``key``; 0 when within ``limit`` per window (``limit`` 0
    means no limit), else the seconds until the window ends."""
    if limit <= 0:
        return 0
    now = time.time() if now is None else now
    window = int(now // window_s)
    used = counter_add(f"{key}:{window}", amount=amount, ttl_s=window_s + 60)
    if used <= limit:
        return 0
    return max(1, math.ceil((window + 1) * window_s - now))


def window_take(
    key: str, *, limit: int, window_s: int, amount: int = 1, now: float | None = None
) -> tuple[int, int]:
    """Take ``amount`` uses of ``key``'s ``limit`` per window if they all fit (0 means no
    limit): ``(0, 0)`` when taken; else nothing is taken and the answer is the seconds
    until the window ends and the uses still left in it."""
    if limit <= 0 or amount <= 0:
        return 0, 0
    now = time.time() if now is None else now
    window = int(now // window_s)
    counter = f"{key}:{window}"
    used = counter_add(counter, amount=amount, ttl_s=window_s + 60)
    if used <= limit:
        return 0, 0
    # Given back: a refused request must not spend what a smaller one could still use.
    with contextlib.suppress(ValueError):  # the counter expired meanwhile
        cache.decr(counter, amount)
    return max(1, math.ceil((window + 1) * window_s - now)), max(0, limit - (used - amount))


def window_spent(key: str, *, limit: int, window_s: int, now: float | None = None) -> int:
    """Counts nothing: 0 while ``key`` has used less than ``limit`` in this window (``limit``
    0 means no limit), else the seconds until the window ends."""
    if limit <= 0:
        return 0
    now = time.time() if now is None else now
    window = int(now // window_s)
    used = cache.get(f"{key}:{window}")
    if used is None or int(used) < limit:
        return 0
    return max(1, math.ceil((window + 1) * window_s - now))


def counter_add(key: str, *, amount: int = 1, ttl_s: int) -> int:
    """Add to a counter that expires after ``ttl_s``; returns its new value.

    add() creates the counter with its expiry only if it is absent (SET NX), and incr()
    is atomic, so concurrent requests in any process never lose a count.
    """
    for _ in range(2):
        cache.add(key, 0, timeout=ttl_s)
        try:
            return int(cache.incr(key, amount))
        except ValueError:  # expired between the two calls
            continue
    return int(cache.incr(key, amount))
