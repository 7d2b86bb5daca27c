from typing import Any

from rest_framework import authentication, exceptions
from rest_framework.request import Request

from apps.teams.services import api_token_authenticate


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
        token = api_token_authenticate(raw=parts[1])
        if token is None:
            raise exceptions.AuthenticationFailed("Unknown or revoked API token.")
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return self.keyword
