from typing import Any

from rest_framework import authentication, exceptions
from rest_framework.request import Request

from apps.teams.services import api_token_authenticate
from apps.teams.tokens import INGEST_TOKEN_PREFIX


class ApiTokenAuthentication(authentication.BaseAuthentication):
    """``Authorization: Bearer <personal API token>``."""

    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        parts = header.split()
        if parts[0].lower() != self.keyword.lower():
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
        token = api_token_authenticate(raw=parts[1])
        if token is None:
            raise exceptions.AuthenticationFailed("Unknown or revoked API token.")
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return self.keyword
