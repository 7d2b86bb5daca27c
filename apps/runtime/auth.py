"""Who may read a runtime document: a team's metrics token, the read-only token of its
figures (the same budgets and percentiles ``/metrics`` serves).

Ingest tokens stay write-only: an application holds one to send spans and may be far
more widely deployed than the people who read a team's figures. Personal API tokens
act as a user and are not for a fleet of instances. Both are refused by their prefix,
without a lookup.
"""

from typing import Any

from django.contrib.auth.models import AnonymousUser
from rest_framework import authentication, exceptions, permissions
from rest_framework.request import Request

from apps.teams.authentication import authorization_parts
from apps.teams.models import MetricsToken
from apps.teams.services import metrics_token_authenticate
from apps.teams.tokens import API_TOKEN_PREFIX, INGEST_TOKEN_PREFIX, token_shaped

SCHEME = "Bearer"
HOW = "send “Authorization: Bearer <metrics token>”, made on the team's Metrics page"


def _refused(message: str) -> exceptions.AuthenticationFailed:
    return exceptions.AuthenticationFailed(message)


class MetricsTokenAuthentication(authentication.BaseAuthentication):
    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        header = request._request.META.get("HTTP_AUTHORIZATION", "")
        if not header:
            raise _refused(f"Missing metrics token: {HOW}.")
        parts = authorization_parts(header)
        if len(parts) != 2 or parts[0].lower() != SCHEME.lower():
            raise _refused(f"Malformed Authorization header: {HOW}.")
        raw = parts[1]
        if raw.startswith(API_TOKEN_PREFIX):
            raise _refused(f"A personal API token cannot read runtime documents: {HOW}.")
        if raw.startswith(INGEST_TOKEN_PREFIX):
            raise _refused(f"An ingest token can only send spans: {HOW}.")
        token = metrics_token_authenticate(raw=raw) if token_shaped(raw) else None
        if token is None:
            raise _refused("Unknown or revoked metrics token.")
        return AnonymousUser(), token

    def authenticate_header(self, request: Request) -> str:
        # Makes DRF answer 401 (not 403) when the header is missing.
        return SCHEME


class HasMetricsToken(permissions.BasePermission):
    def has_permission(self, request: Request, view: Any) -> bool:
        return isinstance(request.auth, MetricsToken)


def request_metrics_token(request: Request) -> MetricsToken:
    """The token that authenticated a request; views reach here only past HasMetricsToken."""
    if not isinstance(request.auth, MetricsToken):
        raise exceptions.NotAuthenticated()
    return request.auth
