from typing import Any

from rest_framework import authentication, exceptions
from rest_framework.request import Request

from apps.teams.services import api_token_authenticate
from apps.teams.tokens import (
    INGEST_TOKEN_PREFIX,
    METRICS_TOKEN_PREFIX,
    TOKEN_MAX_CHARS,
    token_shaped,
)

__all__ = ["TOKEN_MAX_CHARS", "ApiTokenAuthentication", "authorization_parts", "token_shaped"]


def authorization_parts(header: str) -> list[str]:
    """The scheme and credentials of an Authorization header. HTTP separates them with
    spaces; ``str.split()`` would also split on a no-break space and its kin."""
    return [part for part in header.split(" ") if part]


class ApiTokenAuthentication(authentication.BaseAuthentication):
    """``Authorization: Bearer <personal API token>``."""

    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        # The header as the server decoded it (latin-1): a blank one or any byte in it
        # is a value to refuse, never an error.
        parts = authorization_parts(request.META.get("HTTP_AUTHORIZATION", ""))
        if not parts or parts[0].lower() != self.keyword.lower():
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed(
                "Send the header as “Authorization: Bearer <token>”."
            )
        # Ingest tokens are write-only: they send spans and must never read a team's data.
        if parts[1].startswith(INGEST_TOKEN_PREFIX):
            raise exceptions.AuthenticationFailed(
                "Ingest tokens can only send spans; use a personal API token."
            )
        if parts[1].startswith(METRICS_TOKEN_PREFIX):
            raise exceptions.AuthenticationFailed(
                "Metrics tokens can only scrape /metrics; use a personal API token."
            )
        token = api_token_authenticate(raw=parts[1]) if token_shaped(parts[1]) else None
        if token is None:
            raise exceptions.AuthenticationFailed("Unknown or revoked API token.")
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return self.keyword
