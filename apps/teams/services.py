from datetime import timedelta
from typing import TypeVar

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from apps.teams.models import ApiToken, BearerToken, IngestToken, Membership, Role, Team
from apps.teams.tokens import (
    API_TOKEN_PREFIX,
    INGEST_TOKEN_PREFIX,
    token_digest,
    token_generate,
)


@transaction.atomic
def team_create(*, slug: str, name: str, owner: User | None = None) -> Team:
    team = Team(slug=slug, name=name or slug)
    team.full_clean()
    team.save()
    if owner is not None:
        Membership.objects.create(team=team, user=owner, role=Role.OWNER)
    return team


def _user_by_identifier(identifier: str) -> User:
    identifier = identifier.strip()
    matches = list(
        User.objects.filter(Q(username__iexact=identifier) | Q(email__iexact=identifier))[:2]
    )
    if len(matches) != 1:
        raise ValidationError(
            {"identifier": f"No single user has the username or email “{identifier}”."}
        )
    return matches[0]


def membership_add(*, team: Team, identifier: str, role: str) -> Membership:
    """Add an existing user, found by username or email, to the team."""
    if role not in Role.values:
        raise ValidationError({"role": f"Unknown role “{role}”."})
    user = _user_by_identifier(identifier)
    if Membership.objects.filter(team=team, user=user).exists():
        raise ValidationError({"identifier": f"{user} is already a member of {team}."})
    return Membership.objects.create(team=team, user=user, role=role)


def _owners_left_without(membership: Membership) -> int:
    return (
        Membership.objects.filter(team_id=membership.team_id, role=Role.OWNER)
        .exclude(pk=membership.pk)
        .count()
    )


@transaction.atomic
def membership_change_role(*, membership: Membership, role: str) -> Membership:
    if role not in Role.values:
        raise ValidationError({"role": f"Unknown role “{role}”."})
    # Lock the team's owner rows so two concurrent demotions cannot both pass the check.
    list(Membership.objects.select_for_update().filter(team_id=membership.team_id, role=Role.OWNER))
    if (
        membership.role == Role.OWNER
        and role != Role.OWNER
        and not _owners_left_without(membership)
    ):
        raise ValidationError({"role": "A team needs at least one owner."})
    membership.role = role
    membership.save(update_fields=["role", "updated_at"])
    return membership


@transaction.atomic
def membership_remove(*, membership: Membership) -> None:
    list(Membership.objects.select_for_update().filter(team_id=membership.team_id, role=Role.OWNER))
    if membership.role == Role.OWNER and not _owners_left_without(membership):
        raise ValidationError("The last owner cannot leave; make someone else an owner first.")
    membership.delete()


def api_token_create(*, user: User, name: str) -> tuple[ApiToken, str]:
    """Create a token and return it with its plain value, which is not stored."""
    name = name.strip() or "API token"
    raw = token_generate(API_TOKEN_PREFIX)
    token = ApiToken(user=user, name=name, prefix=raw[:12], digest=token_digest(raw))
    token.full_clean()
    token.save()
    return token, raw


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
    if not raw.startswith(API_TOKEN_PREFIX):
        return None
    token = (
        ApiToken.objects.select_related("user")
        .filter(digest=token_digest(raw), revoked_at__isnull=True, user__is_active=True)
        .first()
    )
    if token is not None:
        _token_mark_used(token)
    return token


def ingest_token_create(
    *, team: Team, name: str, created_by: User | None
) -> tuple[IngestToken, str]:
    """Create a team's ingest token and return it with its plain value, which is not stored."""
    name = name.strip() or "Ingest token"
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


def user_create(*, username: str, email: str = "", password: str | None = None) -> User:
    """Create a user; without a password the account cannot sign in until one is set."""
    username = username.strip()
    email = User.objects.normalize_email(email.strip())
    if User.objects.filter(username__iexact=username).exists():
        raise ValidationError({"username": f"The username “{username}” is taken."})
    # Members are invited by email, so an address must lead to one account only.
    if email and User.objects.filter(email__iexact=email).exists():
        raise ValidationError({"email": f"An account with the email “{email}” already exists."})
    user = User(username=username, email=email)
    if password:
        user.set_password(password)
    else:
        user.set_unusable_password()
    user.full_clean()
    user.save()
    return user
