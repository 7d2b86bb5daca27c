"""Access helpers for channels, rules and incidents: the only way views reach them.

Another team's object is a 404, as a team the user is not in; a viewer's write is a
403 (``apps.teams.access``). The ``*_for_request`` forms serve the REST API.
"""

from django.contrib.auth.models import AnonymousUser, User
from django.shortcuts import get_object_or_404
from rest_framework.request import Request

from apps.alerts.models import AlertRule, Channel, Incident
from apps.teams.access import membership_for_user, membership_for_writer
from apps.teams.models import Membership, Team
from apps.teams.request_team import team_slug_for_request


def _membership(user: User | AnonymousUser, team_slug: str, write: bool) -> Membership:
    lookup = membership_for_writer if write else membership_for_user
    return lookup(user=user, team_slug=team_slug)


def channel_for_user(
    *, user: User | AnonymousUser, team_slug: str, channel_slug: str, write: bool = False
) -> tuple[Membership, Channel]:
    membership = _membership(user, team_slug, write)
    return membership, get_object_or_404(Channel, team=membership.team, slug=channel_slug)


def rule_for_user(
    *, user: User | AnonymousUser, team_slug: str, rule_slug: str, write: bool = False
) -> tuple[Membership, AlertRule]:
    membership = _membership(user, team_slug, write)
    rule = get_object_or_404(
        AlertRule.objects.select_related("pipeline", "stage"), team=membership.team, slug=rule_slug
    )
    return membership, rule


def incident_for_user(
    *, user: User | AnonymousUser, team_slug: str, incident_id: int
) -> tuple[Membership, Incident]:
    membership = _membership(user, team_slug, write=False)
    incident = get_object_or_404(
        Incident.objects.select_related("pipeline", "stage", "rule"),
        team=membership.team,
        pk=incident_id,
    )
    return membership, incident


def team_for_request(request: Request, *, write: bool = False) -> Team:
    return _membership(request.user, team_slug_for_request(request), write).team


def rule_for_request(request: Request, rule_slug: str, *, write: bool = False) -> AlertRule:
    return get_object_or_404(
        AlertRule.objects.select_related("pipeline", "stage"),
        team=team_for_request(request, write=write),
        slug=rule_slug,
    )


def incident_for_request(request: Request, incident_id: int) -> Incident:
    return get_object_or_404(
        Incident.objects.select_related("pipeline", "stage", "rule"),
        team=team_for_request(request),
        pk=incident_id,
    )
