"""Runtime documents per account: every instance of every application of an account's
teams asks, so the allowance is per account (like ingestion's), not per token."""

from typing import Any

from django.conf import settings
from rest_framework.exceptions import Throttled
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

from apps.core.counters import window_consume
from apps.runtime.auth import request_metrics_token
from apps.teams.accounts import account_of

WINDOW_S = 60


class RuntimeDocumentThrottle(BaseThrottle):
    def allow_request(self, request: Request, view: Any) -> bool:
        token = request_metrics_token(request)
        limit = settings.RUNTIME_REQUESTS_PER_MINUTE_PER_ACCOUNT
        key = f"runtime:account:{account_of(team=token.team).key}"
        wait = window_consume(key, limit=limit, window_s=WINDOW_S)
        if wait:
            raise Throttled(
                wait,
                f"This account's applications are over their {limit} runtime documents a "
                f"minute together (RUNTIME_REQUESTS_PER_MINUTE_PER_ACCOUNT); retry in {wait} s.",
            )
        return True
