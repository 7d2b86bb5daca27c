"""Saved scenarios of a pipeline: listed by anyone in the team, saved and deleted by writers."""

from django.core.exceptions import ValidationError
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from apps.core.api.views import ApiView
from apps.pipelines.access import pipeline_for_request
from apps.pipelines.models import Pipeline
from apps.teams.api_schema import team_schema
from apps.teams.request_team import request_user
from apps.whatif.access import scenario_for_pipeline
from apps.whatif.apis.serializers import ScenarioInput, ScenarioOutput
from apps.whatif.changes import changes_from_data
from apps.whatif.models import SavedScenario
from apps.whatif.page_link import scenario_page_url
from apps.whatif.params import stages_by_slug
from apps.whatif.selectors.runs import scenarios_for_pipeline
from apps.whatif.services import scenario_delete, scenario_save

TAGS = ["what-if"]


def _output(scenario: SavedScenario, pipeline: Pipeline) -> dict[str, object]:
    return ScenarioOutput(
        {
            "id": scenario.pk,
            "name": scenario.name,
            "changes": scenario.changes,
            "created_by": scenario.created_by,
            "created_at": scenario.created_at,
            "updated_at": scenario.updated_at,
            "url": scenario_page_url(pipeline=pipeline, scenario=scenario),
        }
    ).data


class ScenarioListApi(ApiView):
    InputSerializer = ScenarioInput

    @team_schema(
        summary="The pipeline's saved what-if scenarios",
        responses={200: ScenarioOutput(many=True)},
        tags=TAGS,
    )
    def get(self, request: Request, pipeline_slug: str) -> Response:
        pipeline = pipeline_for_request(request, pipeline_slug)
        scenarios = scenarios_for_pipeline(pipeline=pipeline).select_related("created_by")
        return Response([_output(scenario, pipeline) for scenario in scenarios])

    @team_schema(
        summary="Save a what-if scenario (by name: the same name replaces it)",
        request=InputSerializer,
        responses={201: ScenarioOutput},
        write=True,
        tags=TAGS,
    )
    def post(self, request: Request, pipeline_slug: str) -> Response:
        pipeline = pipeline_for_request(request, pipeline_slug, write=True)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        try:
            changes = changes_from_data(data["changes"], stages=stages_by_slug(pipeline=pipeline))
        except ValidationError as exc:
            raise serializers.ValidationError({"changes": exc.messages}) from None
        scenario = scenario_save(
            pipeline=pipeline,
            name=data["name"],
            changes=[change.as_data() for change in changes],
            user=request_user(request),
        )
        return Response(_output(scenario, pipeline), status=status.HTTP_201_CREATED)


class ScenarioDetailApi(ApiView):
    @team_schema(
        summary="Delete a saved what-if scenario",
        responses={204: None},
        write=True,
        tags=TAGS,
    )
    def delete(self, request: Request, pipeline_slug: str, scenario_id: int) -> Response:
        pipeline = pipeline_for_request(request, pipeline_slug, write=True)
        scenario_delete(scenario=scenario_for_pipeline(pipeline=pipeline, scenario_id=scenario_id))
        return Response(status=status.HTTP_204_NO_CONTENT)
