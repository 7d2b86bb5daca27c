"""Hourly allowances kept in the shared cache (``apps.core.counters``): sign-ups per
client address, invitation e-mails per inviting user, verification e-mails per user, and
the allowances of an account (apps/teams/accounts.py)."""

import math

from django.conf import settings
from django.core.exceptions import ValidationError

from apps.core.counters import window_consume, window_take

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


def rate_take(
    key: str, *, limit: int, amount: int = 1, now: float | None = None
) -> tuple[int, int]:
    """``window_take`` over the hour."""
    return window_take(key, limit=limit, window_s=WINDOW_S, amount=amount, now=now)


def signup_rate_consume(*, client_ip: str, now: float | None = None) -> int:
    """Count a sign-up attempt from this address; 0 when allowed, else seconds to wait."""
    return window_consume(
        f"teams:signup:{client_ip}", limit=settings.SIGNUP_RATE_PER_HOUR, window_s=WINDOW_S, now=now
    )


def invitation_send_consume(*, user_id: int, now: float | None = None) -> int:
    """Count an invitation e-mail sent by this user; 0 when allowed, else seconds to wait.

    Per user, not per team: anyone can sign up and create teams, and must not turn
    the site into a way of mailing arbitrary addresses.
    """
    return window_consume(
        f"teams:invitations:{user_id}",
        limit=settings.INVITATION_SENDS_PER_HOUR,
        window_s=WINDOW_S,
        now=now,
    )


def verification_send_consume(*, user_id: int, now: float | None = None) -> int:
    """Count a verification e-mail asked for by this user; 0 when allowed, else seconds
    to wait. A button that mails on every press would let anyone flood an address."""
    return window_consume(
        f"teams:verifications:{user_id}",
        limit=settings.EMAIL_VERIFICATION_SENDS_PER_HOUR,
        window_s=WINDOW_S,
        now=now,
    )
