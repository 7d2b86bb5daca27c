"""Hourly allowances kept in the shared cache: sign-ups per client address, invitation
e-mails per inviting user.

Redis in production, so every web process counts against the same window; a fixed
window of an hour is coarse, but an abuser gets at most twice the allowance in any
hour, and a legitimate user never waits longer than the rest of the hour.
"""

import math
import time

from django.conf import settings
from django.core.cache import cache

WINDOW_S = 3600
# Outlives its window, so a counter never expires while requests still use it.
_COUNTER_TTL_S = WINDOW_S + 60


def _consume(key: str, *, limit: int, now: float | None) -> int:
    """Count one use; 0 when within ``limit`` per hour (0 means no limit), else the
    seconds until the window ends."""
    if limit <= 0:
        return 0
    now = time.time() if now is None else now
    window = int(now // WINDOW_S)
    used = _add_atomically(f"{key}:{window}")
    if used <= limit:
        return 0
    return max(1, math.ceil((window + 1) * WINDOW_S - now))


def _add_atomically(key: str) -> int:
    # add() creates the counter with its expiry only if absent (SET NX), and incr() is
    # atomic, so concurrent requests in any process never lose a count.
    for _ in range(2):
        cache.add(key, 0, timeout=_COUNTER_TTL_S)
        try:
            return cache.incr(key)
        except ValueError:  # expired between the two calls
            continue
    return cache.incr(key)


def signup_rate_consume(*, client_ip: str, now: float | None = None) -> int:
    """Count a sign-up attempt from this address; 0 when allowed, else seconds to wait."""
    return _consume(f"teams:signup:{client_ip}", limit=settings.SIGNUP_RATE_PER_HOUR, now=now)


def invitation_send_consume(*, user_id: int, now: float | None = None) -> int:
    """Count an invitation e-mail sent by this user; 0 when allowed, else seconds to wait.

    Per user, not per team: anyone can sign up and create teams, and must not turn
    the site into a way of mailing arbitrary addresses.
    """
    return _consume(
        f"teams:invitations:{user_id}", limit=settings.INVITATION_SENDS_PER_HOUR, now=now
    )
