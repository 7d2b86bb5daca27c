from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db.models import F, QuerySet
from django.db.models.functions import Lower

from apps.teams.models import (
    ApiToken,
    EmailVerification,
    IngestToken,
    Invitation,
    Membership,
    MetricsToken,
    Role,
    Team,
)
from apps.teams.tokens import token_digest, token_shaped


def teams_for_user(*, user: User) -> QuerySet[Team]:
    return Team.objects.filter(memberships__user=user).order_by("name")


def memberships_for_user(*, user: User) -> QuerySet[Membership]:
    return Membership.objects.filter(user=user).select_related("team").order_by("team__name")


def membership_default_for_user(*, user: User) -> Membership | None:
    """The team the user works in when nothing names one: the one they chose, else
    their only team; None for several teams and no choice, or none."""
    memberships = memberships_for_user(user=user)
    chosen = memberships.filter(is_default=True).first()
    if chosen is not None:
        return chosen
    only = list(memberships[:2])
    return only[0] if len(only) == 1 else None


def memberships_for_team(*, team: Team) -> QuerySet[Membership]:
    return Membership.objects.filter(team=team).select_related("user").order_by("user__username")


def api_tokens_for_user(*, user: User) -> QuerySet[ApiToken]:
    return ApiToken.objects.filter(user=user).order_by("-created_at")


def ingest_tokens_for_team(*, team: Team) -> QuerySet[IngestToken]:
    return (
        IngestToken.objects.filter(team=team).select_related("created_by").order_by("-created_at")
    )


def metrics_tokens_for_team(*, team: Team) -> QuerySet[MetricsToken]:
    return (
        MetricsToken.objects.filter(team=team).select_related("created_by").order_by("-created_at")
    )


def ingest_token_active_for_team(*, team: Team, raw: str) -> IngestToken | None:
    """The team's unrevoked ingest token with this value; unlike authenticating, records no use."""
    return IngestToken.objects.filter(
        team=team, digest=token_digest(raw), revoked_at__isnull=True
    ).first()


def team_by_slug(*, slug: str) -> Team | None:
    return Team.objects.filter(slug=slug).first()


def user_by_username(*, username: str) -> User | None:
    return get_user_model().objects.filter(username=username).first()


def invitations_open_for_team(*, team: Team) -> QuerySet[Invitation]:
    """Invitations neither accepted nor revoked, expired ones included (to resend)."""
    return (
        Invitation.objects.filter(team=team, accepted_at__isnull=True, revoked_at__isnull=True)
        .select_related("invited_by")
        .order_by("-created_at")
    )


def invitation_by_token(*, raw: str) -> Invitation | None:
    """The invitation whose link carries this token, in any state; None for anything else."""
    if not token_shaped(raw):
        return None
    return (
        Invitation.objects.select_related("team", "invited_by")
        .filter(digest=token_digest(raw))
        .first()
    )


def user_email_verified(*, user: User) -> bool:
    """Whether the user showed they read the address their account has now."""
    if not user.email:
        return False
    return EmailVerification.objects.filter(user=user, email=user.email.lower()).exists()


def verified_member_emails(*, team: Team, owners_only: bool = False) -> set[str]:
    """The addresses, lowercased, of the team's members (or owners) who are verified users."""
    members = Membership.objects.filter(team=team)
    if owners_only:
        members = members.filter(role=Role.OWNER)
    return set(
        members.annotate(address=Lower("user__email"))
        .filter(user__email_verification__email=F("address"))
        .values_list("address", flat=True)
    )
