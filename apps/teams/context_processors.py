from typing import Any

from django.http import HttpRequest
from django.utils.functional import SimpleLazyObject

from apps.teams.selectors import memberships_for_user, user_email_verified


def teams(request: HttpRequest) -> dict[str, Any]:
    """The signed-in user's teams, for the team switcher in the header, and whether to
    offer verifying their address (asked only when a page shows the notice)."""
    user = request.user
    if not user.is_authenticated:
        return {}
    return {
        "my_memberships": memberships_for_user(user=user),
        "email_unverified": SimpleLazyObject(
            lambda: bool(user.email) and not user_email_verified(user=user)
        ),
    }
