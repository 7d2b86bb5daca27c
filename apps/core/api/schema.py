"""OpenAPI pieces shared by every API view: the error body and filters."""

from django_filters import ChoiceFilter, FilterSet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import serializers


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
    404: "No such object in this team, a team you are not a member of, or a page past the last.",
    409: "It conflicts with work in flight, such as the account's running recompute.",
    413: "The request body is too large.",
    422: "The request was understood but its computation failed (see `message`).",
    429: (
        "Too many requests: this token's or its account's allowance per minute, or the "
        "account's what-if runs in flight; retry after `Retry-After` seconds."
    ),
    503: (
        "A database statement ran past the web's statement timeout (`timeout`); nothing "
        "was changed. Retry after `Retry-After` seconds, or ask for less."
    ),
}
# Any operation may meet its allowance or the statement timeout.
ALWAYS = (429, 503)


def error_responses(*codes: int) -> dict[int, OpenApiResponse]:
    return {
        code: OpenApiResponse(response=ErrorSerializer, description=ERROR_DESCRIPTIONS[code])
        for code in sorted({*codes, *ALWAYS})
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
