"""A pipeline's objective: error budget left over 30 days and burn rates."""

from django.utils import timezone
from rest_framework.request import Request
from rest_framework.response import Response

from apps.core.api.views import ApiView
from apps.pipelines.access import pipeline_for_request
from apps.rollups.apis.serializers import ObjectiveOutput, objective_data
from apps.rollups.selectors.objectives import pipeline_objective_status
from apps.teams.api_schema import team_schema


class PipelineObjectiveApi(ApiView):
    @team_schema(
        summary="A pipeline's objective: error budget and burn rates",
        description=(
            "From the good/total counts of the end-to-end rollups: the error budget left "
            "over the last 30 days, and burn rates over 5m, 30m, 1h, 6h and 3d. Without an "
            "objective, `objective` and `error_budget` are null."
        ),
        responses={200: ObjectiveOutput},
        tags=["objectives"],
    )
    def get(self, request: Request, pipeline_slug: str) -> Response:
        pipeline = pipeline_for_request(request, pipeline_slug)
        now = timezone.now()
        status = pipeline_objective_status(pipeline=pipeline, now=now)
        return Response(ObjectiveOutput(objective_data(pipeline.slug, status, now)).data)
