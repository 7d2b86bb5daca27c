"""Violations: the team's list with filters, and one violation."""

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from apps.core.api.pagination import DefaultPagination, paginated_response
from apps.core.api.views import ApiView
from apps.rollups.access import violation_for_team
from apps.rollups.apis.serializers import ViolationOutput
from apps.rollups.selectors.violations import CLOSED, E2E, OPEN, violations_for_team
from apps.teams.api_schema import team_schema
from apps.teams.request_team import membership_for_request


def _query(name: str, description: str, **extra: Any) -> OpenApiParameter:
    return OpenApiParameter(
        name, OpenApiTypes.STR, OpenApiParameter.QUERY, description=description, **extra
    )


class ViolationListApi(ApiView):
    pagination_class = DefaultPagination

    class FilterSerializer(serializers.Serializer):
        pipeline = serializers.SlugField(required=False, allow_blank=True, max_length=50)
        stage = serializers.SlugField(required=False, allow_blank=True, max_length=50)
        state = serializers.ChoiceField(choices=[OPEN, CLOSED], required=False, allow_blank=True)

    @team_schema(
        summary="The team's budget violations, newest first",
        description=(
            "A violation opens when an evaluation finds a budgeted percentile over its "
            "budget in the pipeline's window, and closes after `close_after` evaluations "
            "in a row back under it."
        ),
        parameters=[
            _query("pipeline", "A pipeline slug."),
            _query("stage", f"A stage slug, or `{E2E}` for end-to-end violations."),
            _query("state", "Open or closed violations only.", enum=[OPEN, CLOSED]),
        ],
        responses={200: ViolationOutput(many=True)},
        tags=["violations"],
    )
    def get(self, request: Request) -> Response:
        membership = membership_for_request(request)
        query = self.FilterSerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        violations = violations_for_team(
            team=membership.team,
            pipeline_slug=query.validated_data.get("pipeline", ""),
            stage_slug=query.validated_data.get("stage", ""),
            state=query.validated_data.get("state", ""),
        )
        return paginated_response(
            request=request, view=self, queryset=violations, serializer_class=ViolationOutput
        )


class ViolationDetailApi(ApiView):
    @team_schema(
        summary="One violation",
        responses={200: ViolationOutput},
        tags=["violations"],
    )
    def get(self, request: Request, violation_id: int) -> Response:
        membership = membership_for_request(request)
        violation = violation_for_team(team=membership.team, violation_id=violation_id)
        return Response(ViolationOutput(violation).data)
