"""The only way views and APIs reach a trace: by hex id, inside one team."""

import re

from django.contrib.auth.models import AnonymousUser, User
from django.http import Http404

from apps.ingest.models import Trace
from apps.teams.access import membership_for_user
from apps.teams.models import Membership, Team

TRACE_HEX = re.compile(r"[0-9a-fA-F]{32}")


def trace_for_team(*, team: Team, trace_hex: str) -> Trace:
    """A malformed id is a 404 like an unknown one: either way there is no such trace here."""
    if not TRACE_HEX.fullmatch(trace_hex):
        raise Http404("No such trace.")
    trace = (
        Trace.objects.select_related("pipeline")
        .filter(team=team, trace_id=bytes.fromhex(trace_hex))
        .first()
    )
    if trace is None:
        raise Http404("No such trace.")
    return trace


def trace_for_user(
    *, user: User | AnonymousUser, team_slug: str, trace_hex: str
) -> tuple[Membership, Trace]:
    membership = membership_for_user(user=user, team_slug=team_slug)
    return membership, trace_for_team(team=membership.team, trace_hex=trace_hex)
