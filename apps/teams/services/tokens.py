"""Personal API tokens and team ingest tokens: created, revoked, authenticated."""

from datetime import timedelta
from typing import TypeVar

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from apps.teams.accounts import account_cap_error, account_lock, account_teams
from apps.teams.models import ApiToken, BearerToken, IngestToken, Team
from apps.teams.tokens import (
    API_TOKEN_PREFIX,
    INGEST_TOKEN_PREFIX,
    token_digest,
    token_generate,
)

API_TOKEN_MAX_DAYS = 3650
REVOKED_BY_PASSWORD_CHANGE = "the password changed"  # noqa: S105 - a reason, not a secret


def api_token_create(
    *, user: User, name: str, expires_in_days: int | None = None
) -> tuple[ApiToken, str]:
    """Create a token and return it with its plain value, which is not stored.

    It works until revoked, until ``expires_in_days`` pass (None: no expiry), or until
    its owner's password changes.
    """
    name = name.strip() or "API token"
    if expires_in_days is not None and not 1 <= expires_in_days <= API_TOKEN_MAX_DAYS:
        raise ValidationError(
            {"expires_in_days": f"A token expires in 1 to {API_TOKEN_MAX_DAYS} days, or never."}
        )
    raw = token_generate(API_TOKEN_PREFIX)
    token = ApiToken(
        user=user,
        name=name,
        prefix=raw[:12],
        digest=token_digest(raw),
        expires_at=(timezone.now() + timedelta(days=expires_in_days) if expires_in_days else None),
    )
    token.full_clean()
    token.save()
    return token, raw


def api_tokens_revoke_for_password_change(*, user_id: int) -> int:
    """Revoke every live token of the user whose password just changed; how many.

    A token is a password of its own: whoever changes a password they fear was seen
    means the tokens made with it too.
    """
    now = timezone.now()
    return ApiToken.objects.filter(user_id=user_id, revoked_at__isnull=True).update(
        revoked_at=now, revoked_reason=REVOKED_BY_PASSWORD_CHANGE, updated_at=now
    )


LAST_USED_RESOLUTION = timedelta(minutes=1)
TokenT = TypeVar("TokenT", bound=BearerToken)


def _token_revoke(token: TokenT) -> TokenT:
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at", "updated_at"])
    return token


def _token_mark_used(token: BearerToken) -> None:
    """Record use at most once a minute per token, whichever process gets there first.

    Busy clients (collectors export every few seconds from many processes) would
    otherwise write on every request.
    """
    now = timezone.now()
    if token.last_used_at is not None and token.last_used_at >= now - LAST_USED_RESOLUTION:
        return  # as read with the token just now: recent enough, no statement needed
    stale = Q(last_used_at__isnull=True) | Q(last_used_at__lt=now - LAST_USED_RESOLUTION)
    if type(token)._default_manager.filter(stale, pk=token.pk).update(last_used_at=now):
        token.last_used_at = now


def api_token_revoke(*, token: ApiToken) -> ApiToken:
    return _token_revoke(token)


def api_token_authenticate(*, raw: str) -> ApiToken | None:
    """The live (unrevoked, unexpired) token with this value, with its user; else None."""
    if not raw.startswith(API_TOKEN_PREFIX):
        return None
    live = Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now())
    token = (
        ApiToken.objects.select_related("user")
        .filter(live, digest=token_digest(raw), revoked_at__isnull=True, user__is_active=True)
        .first()
    )
    if token is not None:
        _token_mark_used(token)
    return token


def ingest_token_create(
    *, team: Team, name: str, created_by: User | None
) -> tuple[IngestToken, str]:
    """Create a team's ingest token and return it with its plain value, which is not stored.

    The teams of an account hold at most ``INGEST_TOKENS_PER_ACCOUNT`` live tokens
    together: each is a credential to watch and revoke, and ingestion's limits are per
    account anyway, so more tokens or more teams gain nothing.
    """
    name = name.strip() or "Ingest token"
    with transaction.atomic():
        cap = settings.INGEST_TOKENS_PER_ACCOUNT
        if cap:
            account_lock(team=team)  # one count per account at a time
            live = IngestToken.objects.filter(
                team__in=account_teams(team=team), revoked_at__isnull=True
            ).count()
            if live >= cap:
                raise account_cap_error(
                    what="live ingest tokens",
                    used=live,
                    cap=cap,
                    setting="INGEST_TOKENS_PER_ACCOUNT",
                    code="too_many_tokens",
                )
        return _ingest_token_save(team=team, name=name, created_by=created_by)


def _ingest_token_save(
    *, team: Team, name: str, created_by: User | None
) -> tuple[IngestToken, str]:
    raw = token_generate(INGEST_TOKEN_PREFIX)
    token = IngestToken(
        team=team, name=name, prefix=raw[:12], digest=token_digest(raw), created_by=created_by
    )
    token.full_clean()
    token.save()
    return token, raw


def ingest_token_revoke(*, token: IngestToken) -> IngestToken:
    return _token_revoke(token)


def ingest_token_authenticate(*, raw: str) -> IngestToken | None:
    """The active ingest token with this value, with its team; None for anything else."""
    if not raw.startswith(INGEST_TOKEN_PREFIX):
        return None
    token = (
        IngestToken.objects.select_related("team")
        .filter(digest=token_digest(raw), revoked_at__isnull=True)
        .first()
    )
    if token is not None:
        _token_mark_used(token)
    return token
