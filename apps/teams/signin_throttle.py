"""Failed sign-ins per client address, whatever the usernames.

django-axes locks one username out from one address after ``LOGIN_FAILURE_LIMIT``
wrong passwords. Spraying one password over many usernames from one address never
reaches that; ``LOGIN_FAILURES_PER_ADDRESS`` failures from an address within
``LOGIN_LOCKOUT_MINUTES`` pause signing in from it, for every username, until the
period ends. Set well above the per-username limit, so that a few people behind one
office address who mistype are not paused together.
"""

from typing import Any

from django.conf import settings
from django.http import HttpRequest

from apps.core.counters import window_consume, window_spent
from apps.teams.client_ip import client_ip_address


def _key(request: HttpRequest) -> str:
    return f"teams:signin-failures:{client_ip_address(request) or 'unknown'}"


def _window_s() -> int:
    return settings.LOGIN_LOCKOUT_MINUTES * 60


def signin_address_paused(*, request: HttpRequest) -> int:
    """Seconds until this address may try again, or 0; counts nothing."""
    limit = settings.LOGIN_FAILURES_PER_ADDRESS
    return window_spent(_key(request), limit=limit, window_s=_window_s())


def signin_failure_count(
    sender: Any, credentials: dict[str, Any], request: HttpRequest | None = None, **kwargs: Any
) -> None:
    """``user_login_failed``: one more failure from the request's address."""
    if request is None:  # authenticate() called outside a request (a command, a test)
        return
    limit = settings.LOGIN_FAILURES_PER_ADDRESS
    window_consume(_key(request), limit=limit, window_s=_window_s())
