"""The team a signed-in user works in: remembered in the session across pages.

Every page under /teams/<slug>/ remembers its team, so the home page and the team
switcher return to it; leaving a team forgets it.
"""

from django.http import HttpRequest

from apps.teams.models import Team

CURRENT_TEAM_SESSION_KEY = "current_team"


def current_team_remember(request: HttpRequest, team: Team) -> None:
    # Setting the same value would still mark the session modified, and every page
    # view (every auto-refresh too) would write it back to the database.
    if request.session.get(CURRENT_TEAM_SESSION_KEY) != team.slug:
        request.session[CURRENT_TEAM_SESSION_KEY] = team.slug


def current_team_forget(request: HttpRequest, team: Team) -> None:
    if request.session.get(CURRENT_TEAM_SESSION_KEY) == team.slug:
        del request.session[CURRENT_TEAM_SESSION_KEY]


def current_team_slug(request: HttpRequest) -> str | None:
    slug = request.session.get(CURRENT_TEAM_SESSION_KEY)
    return slug if isinstance(slug, str) else None
