"""Which team an API request acts on.

Tokens are personal and pipeline URLs carry no team, so the team comes from the
``team`` query parameter or the ``X-Team`` header. Without either it is the user's
default team: the one they chose in the switcher, else their only team (see
``membership_default_for_user``); being added to another team never changes it.
Membership and role checks are the teams' access helpers: a team the user is not
in is a 404, a viewer's write a 403.
"""

from django.contrib.auth.models import AnonymousUser, User
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework import status
from rest_framework.exceptions import APIException, NotAuthenticated
from rest_framework.request import Request

from apps.teams.access import membership_for_user, membership_for_writer
from apps.teams.models import Membership
from apps.teams.selectors import membership_default_for_user

TEAM_QUERY_PARAMETER = "team"
TEAM_HEADER = "X-Team"


class TeamRequired(APIException):
    status_code = status.HTTP_400_BAD_REQUEST
    default_code = "team_required"
    default_detail = (
        f"You belong to several teams and chose no default (or to none): name one with "
        f"?{TEAM_QUERY_PARAMETER}=<slug> or the {TEAM_HEADER} header."
    )


def request_user(request: Request) -> User:
    """The authenticated user; views reach here only past IsAuthenticated."""
    if isinstance(request.user, AnonymousUser):
        raise NotAuthenticated()
    return request.user


def team_slug_for_request(request: Request) -> str:
    slug = request.query_params.get(TEAM_QUERY_PARAMETER) or request.headers.get(TEAM_HEADER)
    if slug:
        return slug.strip()
    default = membership_default_for_user(user=request_user(request))
    if default is None:
        raise TeamRequired()
    return default.team.slug


def membership_for_request(request: Request, *, write: bool = False) -> Membership:
    lookup = membership_for_writer if write else membership_for_user
    return lookup(user=request.user, team_slug=team_slug_for_request(request))


TEAM_PARAMETERS = [
    OpenApiParameter(
        TEAM_QUERY_PARAMETER,
        OpenApiTypes.STR,
        OpenApiParameter.QUERY,
        description="Slug of the team to act on; left out, your default team.",
    ),
    OpenApiParameter(
        TEAM_HEADER,
        OpenApiTypes.STR,
        OpenApiParameter.HEADER,
        description=f"Team slug, as an alternative to ?{TEAM_QUERY_PARAMETER}= (the query wins).",
    ),
]
