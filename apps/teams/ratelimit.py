"""Hourly allowances kept in the shared cache: sign-ups per client address, invitation
e-mails per inviting user, verification e-mails per user, and the allowances of an
account (apps/teams/accounts.py).

Redis in production, so every web process counts against the same window; a fixed
window of an hour is coarse, but an abuser gets at most twice the allowance in any
hour, and a legitimate user never waits longer than the rest of the hour.
"""

import contextlib
import math
import time

from django.conf import settings
from django.core.cache import cache
from django.core.exceptions import ValidationError

WINDOW_S = 3600


class RateExceeded(ValidationError):
    """An hourly allowance is spent; ``retry_after_s`` says for how long (a page's or
    the API's 429 and ``Retry-After``)."""

    def __init__(self, message: str, *, retry_after_s: int) -> None:
        super().__init__(message, code="throttled")
        self.retry_after_s = retry_after_s


def wait_words(seconds: int) -> str:
    minutes = math.ceil(seconds / 60)
    return f"{minutes} minute{'s' if minutes != 1 else ''}"


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
    return _seconds_left(window, now)


def _seconds_left(window: int, now: float) -> int:
    return max(1, math.ceil((window + 1) * WINDOW_S - now))


def rate_take(
    key: str, *, limit: int, amount: int = 1, now: float | None = None
) -> tuple[int, int]:
    """Take ``amount`` uses of ``key``'s hourly ``limit`` if they all fit (0 means no
    limit): ``(0, 0)`` when taken; else nothing is taken and the answer is the seconds
    until the window ends and the uses still left in it."""
    if limit <= 0 or amount <= 0:
        return 0, 0
    now = time.time() if now is None else now
    window = int(now // WINDOW_S)
    counter = f"{key}:{window}"
    used = _add_atomically(counter, amount)
    if used <= limit:
        return 0, 0
    # Given back: a refused request must not spend what a smaller one could still use.
    with contextlib.suppress(ValueError):  # the counter expired meanwhile
        cache.decr(counter, amount)
    return _seconds_left(window, now), max(0, limit - (used - amount))


def _add_atomically(key: str, amount: int = 1) -> int:
    # add() creates the counter with its expiry only if absent (SET NX), and incr() is
    # atomic, so concurrent requests in any process never lose a count.
    for _ in range(2):
        cache.add(key, 0, timeout=_COUNTER_TTL_S)
        try:
            return cache.incr(key, amount)
        except ValueError:  # expired between the two calls
            continue
    return cache.incr(key, amount)


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


def verification_send_consume(*, user_id: int, now: float | None = None) -> int:
    """Count a verification e-mail asked for by this user; 0 when allowed, else seconds
    to wait. A button that mails on every press would let anyone flood an address."""
    return _consume(
        f"teams:verifications:{user_id}",
        limit=settings.EMAIL_VERIFICATION_SENDS_PER_HOUR,
        now=now,
    )
