from typing import Any

from django.http import HttpRequest

from apps.teams.selectors import memberships_for_user


def teams(request: HttpRequest) -> dict[str, Any]:
    """The signed-in user's teams, for the team switcher in the header."""
    if not request.user.is_authenticated:
        return {}
    return {"my_memberships": memberships_for_user(user=request.user)}
