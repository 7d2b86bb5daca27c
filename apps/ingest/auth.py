"""Ingest tokens on requests: ``Authorization: Bearer <ingest token>``.

Only a team's ingest token sends spans; a personal API token is refused by name
(its prefix), so it is never even looked up here.
"""

from typing import Any

from django.contrib.auth.models import AnonymousUser
from django.http import HttpRequest
from rest_framework import authentication, exceptions, permissions
from rest_framework.request import Request

from apps.teams.authentication import authorization_parts, token_shaped
from apps.teams.models import IngestToken
from apps.teams.services import ingest_token_authenticate
from apps.teams.tokens import API_TOKEN_PREFIX

SCHEME = "Bearer"
HOW = "send “Authorization: Bearer <ingest token>”"


class Unauthenticated(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def bearer_value(request: HttpRequest) -> str | None:
    """The token in the Authorization header; None when the header is absent."""
    header = request.META.get("HTTP_AUTHORIZATION", "")
    if not header:
        return None
    parts = authorization_parts(header)
    if len(parts) != 2 or parts[0].lower() != SCHEME.lower():
        raise Unauthenticated(f"malformed Authorization header; {HOW}")
    return parts[1]


def ingest_token_for_request(request: HttpRequest) -> IngestToken:
    """The request's active ingest token, with its team."""
    raw = bearer_value(request)
    if raw is None:
        raise Unauthenticated(f"missing ingest token; {HOW}")
    return ingest_token_for_value(raw)


def ingest_token_for_value(raw: str) -> IngestToken:
    if raw.startswith(API_TOKEN_PREFIX):
        raise Unauthenticated("a personal API token cannot send spans; use a team ingest token")
    token = ingest_token_authenticate(raw=raw) if token_shaped(raw) else None
    if token is None:
        raise Unauthenticated("unknown or revoked ingest token")
    return token


class IngestTokenAuthentication(authentication.BaseAuthentication):
    """DRF's side of the same rule, for the native span API."""

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        try:
            return AnonymousUser(), ingest_token_for_request(request._request)
        except Unauthenticated as exc:
            raise exceptions.AuthenticationFailed(exc.message) from None

    def authenticate_header(self, request: Request) -> str:
        # Makes DRF answer 401 (not 403) when the header is missing.
        return SCHEME


class HasIngestToken(permissions.BasePermission):
    def has_permission(self, request: Request, view: Any) -> bool:
        return isinstance(request.auth, IngestToken)


def request_ingest_token(request: Request) -> IngestToken:
    """The token that authenticated a DRF request; views reach here only past HasIngestToken."""
    if not isinstance(request.auth, IngestToken):
        raise exceptions.NotAuthenticated()
    return request.auth
