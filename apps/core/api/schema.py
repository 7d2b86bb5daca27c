"""OpenAPI pieces shared by every API view: the Bearer scheme, the error body, filters."""

from typing import Any

from django_filters import ChoiceFilter, FilterSet
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers

from apps.core.api.team import TEAM_PARAMETERS
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


class ErrorDetailSerializer(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()
    # The body's key; DRF takes declared fields off the class, so the property is untouched.
    fields = serializers.DictField(  # type: ignore[assignment]
        child=serializers.ListField(child=serializers.CharField()),
        required=False,
        help_text="For validation errors: field (dotted when nested) to its messages.",
    )


class ErrorSerializer(serializers.Serializer):
    error = ErrorDetailSerializer()


ERROR_DESCRIPTIONS = {
    400: "Invalid input (see `fields`), malformed JSON, or `team_required`.",
    401: "Missing, unknown or revoked API token.",
    403: "Viewers cannot change a team's configuration.",
    404: "No such object in this team, or a team you are not a member of.",
    413: "The request body is too large.",
}


def error_responses(*codes: int) -> dict[int, OpenApiResponse]:
    return {
        code: OpenApiResponse(response=ErrorSerializer, description=ERROR_DESCRIPTIONS[code])
        for code in codes
    }


def filterset_parameters(filterset_class: type[FilterSet]) -> list[OpenApiParameter]:
    """Query parameters of a FilterSet, for views that filter without a generic view."""
    parameters = []
    for name, filter_ in filterset_class.base_filters.items():
        choices = filter_.extra.get("choices") if isinstance(filter_, ChoiceFilter) else None
        parameters.append(
            OpenApiParameter(
                name,
                OpenApiTypes.STR,
                OpenApiParameter.QUERY,
                description=str(filter_.label or ""),
                enum=[value for value, _ in choices] if choices else None,
            )
        )
    return parameters


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
