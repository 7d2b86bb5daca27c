"""The alert history: incidents with their facts, and one with its deliveries."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from apps.alerts.access import incident_for_request, team_for_request
from apps.alerts.apis.serializers import (
    IncidentDetailOutput,
    IncidentOutput,
    IncidentSummaryOutput,
    NotificationOutput,
)
from apps.alerts.selectors.history import (
    INCIDENT_STATUSES,
    incident_notifications,
    incidents_for_team,
    with_delivery_counts,
)
from apps.core.api.pagination import DefaultPagination, paginated_response
from apps.core.api.views import ApiView
from apps.teams.api_schema import team_schema

TAGS = ["incidents"]


class IncidentListApi(ApiView):
    pagination_class = DefaultPagination

    class FilterSerializer(serializers.Serializer):
        status = serializers.ChoiceField(
            choices=INCIDENT_STATUSES, required=False, allow_blank=True
        )
        pipeline = serializers.SlugField(required=False, allow_blank=True, max_length=50)

    @team_schema(
        summary="The team's incidents, newest first",
        description=(
            "An incident is one firing of an alert rule for one scope, from when it fired "
            "until it resolved, with the facts its notifications carried."
        ),
        parameters=[
            OpenApiParameter(
                "status",
                OpenApiTypes.STR,
                OpenApiParameter.QUERY,
                description="Open (firing) or resolved incidents only.",
                enum=list(INCIDENT_STATUSES),
            ),
            OpenApiParameter(
                "pipeline", OpenApiTypes.STR, OpenApiParameter.QUERY, description="A pipeline slug."
            ),
        ],
        responses={200: IncidentSummaryOutput(many=True)},
        tags=TAGS,
    )
    def get(self, request: Request) -> Response:
        team = team_for_request(request)
        query = self.FilterSerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        incidents = incidents_for_team(
            team=team,
            status=query.validated_data.get("status") or None,
            pipeline_slug=query.validated_data.get("pipeline") or None,
        )
        return paginated_response(
            request=request,
            view=self,
            queryset=with_delivery_counts(incidents),
            serializer_class=IncidentSummaryOutput,
        )


class IncidentDetailApi(ApiView):
    @team_schema(
        summary="One incident with every notification and its delivery attempts",
        responses={200: IncidentDetailOutput},
        tags=TAGS,
    )
    def get(self, request: Request, incident_id: int) -> Response:
        incident = incident_for_request(request, incident_id)
        notifications = incident_notifications(incident=incident)
        data = {
            **IncidentOutput(incident).data,
            "notifications": NotificationOutput(notifications, many=True).data,
        }
        return Response(data)
