"""OpenAPI for the team-scoped API: the Bearer scheme of personal tokens, team selection.

drf-spectacular registers ``ApiTokenScheme`` when this module is imported, which
the app's ``ready`` does.
"""

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.utils import OpenApiParameter, extend_schema

from apps.core.api.schema import error_responses
from apps.teams.request_team import TEAM_PARAMETERS
from apps.teams.tokens import API_TOKEN_PREFIX


class ApiTokenScheme(OpenApiAuthenticationExtension):
    target_class = "apps.teams.authentication.ApiTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": (
                f"A personal API token ({API_TOKEN_PREFIX}…), created under API tokens "
                "in the web app: `Authorization: Bearer <token>`."
            ),
        }


def team_schema(
    *,
    summary: str,
    description: str | None = None,
    responses: dict[int, Any],
    request: Any = None,
    parameters: list[OpenApiParameter] | None = None,
    write: bool = False,
    tags: list[str] | None = None,
) -> Any:
    """``extend_schema`` for an operation on the current team: team selection and its errors."""
    codes = [400, 401, 404] + ([403] if write else []) + ([413] if request is not None else [])
    return extend_schema(
        summary=summary,
        description=description,
        request=request,
        responses={**responses, **error_responses(*codes)},
        parameters=[*TEAM_PARAMETERS, *(parameters or [])],
        tags=tags,
    )
