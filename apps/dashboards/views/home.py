from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect

from apps.core.htmx import HtmxHttpRequest
from apps.teams.current_team import current_team_slug
from apps.teams.selectors import membership_default_for_user, teams_for_user


@login_required
def home(request: HtmxHttpRequest) -> HttpResponse:
    """Send the user to the team they used last, else their default team, else the first."""
    teams = teams_for_user(user=request.user)
    slug = current_team_slug(request)
    team = teams.filter(slug=slug).first() if slug else None
    if team is None:
        # Never the first by name alone: being invited to a team named "aaa" must not
        # change where anyone lands.
        default = membership_default_for_user(user=request.user)
        team = default.team if default is not None else teams.first()
    if team is None:
        return redirect("teams:create")
    return redirect("dashboards:team_home", team_slug=team.slug)
