"""Hourly allowances kept in the shared cache: sign-ups per client address, invitation
e-mails per inviting user (``apps.core.counters``)."""

from django.conf import settings

from apps.core.counters import window_consume

WINDOW_S = 3600


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
