"""Access helpers: the only way views reach a team.

Outsiders get 404 (a team's existence is not disclosed); members whose role is
too low for a write get 403.
"""

from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import PermissionDenied
from django.http import Http404

from apps.teams.models import Membership, Role


def membership_for_user(*, user: User | AnonymousUser, team_slug: str) -> Membership:
    # A slug holds no NUL; PostgreSQL would refuse the text itself (a 500, not a 404).
    if not user.is_authenticated or "\x00" in team_slug:
        raise Http404("No such team.")
    try:
        return Membership.objects.select_related("team").get(team__slug=team_slug, user=user)
    except Membership.DoesNotExist:
        raise Http404("No such team.") from None


def membership_for_writer(*, user: User | AnonymousUser, team_slug: str) -> Membership:
    membership = membership_for_user(user=user, team_slug=team_slug)
    if not membership.can_write:
        raise PermissionDenied("Viewers cannot change this team's configuration.")
    return membership


def membership_for_owner(*, user: User | AnonymousUser, team_slug: str) -> Membership:
    membership = membership_for_user(user=user, team_slug=team_slug)
    if membership.role != Role.OWNER:
        raise PermissionDenied("Only owners can manage members.")
    return membership
