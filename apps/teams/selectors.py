from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet

from apps.teams.models import ApiToken, Membership, Team


def teams_for_user(*, user: AbstractBaseUser) -> QuerySet[Team]:
    return Team.objects.filter(memberships__user=user).order_by("name")


def memberships_for_user(*, user: AbstractBaseUser) -> QuerySet[Membership]:
    return Membership.objects.filter(user=user).select_related("team").order_by("team__name")


def memberships_for_team(*, team: Team) -> QuerySet[Membership]:
    return Membership.objects.filter(team=team).select_related("user").order_by("user__username")


def api_tokens_for_user(*, user: AbstractBaseUser) -> QuerySet[ApiToken]:
    return ApiToken.objects.filter(user=user).order_by("-created_at")
