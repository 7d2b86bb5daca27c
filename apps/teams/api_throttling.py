"""Throttling of the REST API: per token, and per account over all its tokens.

Anyone may sign up, and a user may mint tokens: a limit per token alone would
multiply with them, so every request also counts against its user's account.
Requests signed in with a session (the browsable API, the schema viewer) count as
one token of their own. Past either allowance: 429 with ``Retry-After``. Ingestion
(``/api/v1/spans``) has its own limits and is not counted here.
"""

from typing import Any

from django.conf import settings
from rest_framework.exceptions import Throttled
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

from apps.core.counters import window_consume
from apps.teams.models import ApiToken

WINDOW_S = 60


class ApiRateThrottle(BaseThrottle):
    def allow_request(self, request: Request, view: Any) -> bool:
        user = request.user
        if user is None or not user.is_authenticated:
            return True  # refused by authentication anyway
        token = request.auth
        # A token's digest, not its id: it is never reused, even by a new database.
        client = f"token:{token.digest[:24]}" if isinstance(token, ApiToken) else "session"
        per_token = settings.API_REQUESTS_PER_MINUTE_PER_TOKEN
        per_account = settings.API_REQUESTS_PER_MINUTE_PER_ACCOUNT
        token_wait = window_consume(f"api:{client}:{user.pk}", limit=per_token, window_s=WINDOW_S)
        account_wait = window_consume(
            f"api:account:{user.pk}", limit=per_account, window_s=WINDOW_S
        )
        if token_wait:
            raise Throttled(
                token_wait,
                f"This token is over its {per_token} requests a minute; retry in {token_wait} s.",
            )
        if account_wait:
            raise Throttled(
                account_wait,
                f"This account's tokens are over their {per_account} requests a minute "
                f"together; retry in {account_wait} s.",
            )
        return True
