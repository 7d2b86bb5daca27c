from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db.models import QuerySet

from apps.teams.models import ApiToken, IngestToken, Membership, Team
from apps.teams.tokens import token_digest


def teams_for_user(*, user: User) -> QuerySet[Team]:
    return Team.objects.filter(memberships__user=user).order_by("name")


def memberships_for_user(*, user: User) -> QuerySet[Membership]:
    return Membership.objects.filter(user=user).select_related("team").order_by("team__name")


def memberships_for_team(*, team: Team) -> QuerySet[Membership]:
    return Membership.objects.filter(team=team).select_related("user").order_by("user__username")


def api_tokens_for_user(*, user: User) -> QuerySet[ApiToken]:
    return ApiToken.objects.filter(user=user).order_by("-created_at")


def ingest_tokens_for_team(*, team: Team) -> QuerySet[IngestToken]:
    return (
        IngestToken.objects.filter(team=team).select_related("created_by").order_by("-created_at")
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
