"""Pipeline operations."""

from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from apps.core.api.errors import api_field_names
from apps.core.api.filters import NameOrSlugFilter, filter_queryset
from apps.core.api.pagination import DefaultPagination, paginated_response
from apps.core.api.schema import filterset_parameters
from apps.core.api.views import ApiView
from apps.pipelines import services
from apps.pipelines.access import pipeline_for_request
from apps.pipelines.apis.serializers import (
    PIPELINE_ERROR_FIELDS,
    BudgetField,
    EvaluationInput,
    MatchInput,
    ObjectiveInput,
    PipelineDetailOutput,
    PipelineSummaryOutput,
    _pipeline_fields,
    evaluation_defaults,
)
from apps.pipelines.presets import PRESET_CHOICES, pipeline_create_from_preset
from apps.pipelines.selectors import (
    pipeline_with_stages,
    pipelines_for_team,
)
from apps.teams.api_schema import team_schema
from apps.teams.request_team import membership_for_request


class PipelineListApi(ApiView):
    pagination_class = DefaultPagination
    FilterSet = NameOrSlugFilter
    OutputSerializer = PipelineSummaryOutput

    @team_schema(
        summary="List the team's pipelines",
        parameters=filterset_parameters(NameOrSlugFilter),
        responses={200: OutputSerializer(many=True)},
        tags=["pipelines"],
    )
    def get(self, request: Request) -> Response:
        membership = membership_for_request(request)
        pipelines = filter_queryset(
            filterset_class=self.FilterSet,
            request=request,
            queryset=pipelines_for_team(team=membership.team),
        )
        return paginated_response(
            request=request, view=self, queryset=pipelines, serializer_class=self.OutputSerializer
        )


class PipelineInput(serializers.Serializer):
    slug = serializers.CharField(max_length=50)
    name = serializers.CharField(max_length=100)
    description = serializers.CharField(allow_blank=True, default="")
    match = MatchInput(default=lambda: {"service": "", "root_span": "", "attributes": {}})
    budget = BudgetField()
    objective = ObjectiveInput(allow_null=True, default=None)
    evaluation = EvaluationInput(default=evaluation_defaults)

    class Meta:
        ref_name = "PipelineInput"


class PipelineCreateApi(ApiView):
    class InputSerializer(PipelineInput):
        preset = serializers.ChoiceField(
            choices=PRESET_CHOICES,
            default="blank",
            help_text="Stages and span rules to start from, as on the creation form: each "
            "stage gets its share of the budget's highest percentile.",
        )

        class Meta:
            ref_name = "PipelineCreateInput"

    @team_schema(
        summary="Create a pipeline",
        description=(
            "With `preset`, the pipeline comes with that preset's stages and span rules; "
            "the response shows them."
        ),
        request=InputSerializer,
        responses={201: PipelineDetailOutput},
        write=True,
        tags=["pipelines"],
    )
    def post(self, request: Request) -> Response:
        membership = membership_for_request(request, write=True)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        fields = _pipeline_fields(serializer.validated_data)
        with api_field_names(PIPELINE_ERROR_FIELDS):
            pipeline = pipeline_create_from_preset(team=membership.team, **fields)
        data = PipelineDetailOutput(pipeline_with_stages(pipeline=pipeline)).data
        return Response(data, status=status.HTTP_201_CREATED)


class PipelineDetailApi(ApiView):
    @team_schema(
        summary="A pipeline with its stages and their rules",
        responses={200: PipelineDetailOutput},
        tags=["pipelines"],
    )
    def get(self, request: Request, pipeline_slug: str) -> Response:
        pipeline = pipeline_for_request(request, pipeline_slug)
        return Response(PipelineDetailOutput(pipeline_with_stages(pipeline=pipeline)).data)


class PipelineUpdateApi(ApiView):
    InputSerializer = PipelineInput

    def _update(self, request: Request, pipeline_slug: str, *, partial: bool) -> Response:
        pipeline = pipeline_for_request(request, pipeline_slug, write=True)
        serializer = self.InputSerializer(data=request.data, partial=partial)
        serializer.is_valid(raise_exception=True)
        with api_field_names(PIPELINE_ERROR_FIELDS):
            pipeline = services.pipeline_update(
                pipeline=pipeline, **_pipeline_fields(serializer.validated_data)
            )
        return Response(PipelineDetailOutput(pipeline_with_stages(pipeline=pipeline)).data)

    @team_schema(
        summary="Replace a pipeline's settings",
        description=(
            "Fields left out take their defaults, `evaluation` keys too; `budget` replaces "
            "the whole budget."
        ),
        request=InputSerializer,
        responses={200: PipelineDetailOutput},
        write=True,
        tags=["pipelines"],
    )
    def put(self, request: Request, pipeline_slug: str) -> Response:
        return self._update(request, pipeline_slug, partial=False)

    @team_schema(
        summary="Change some of a pipeline's settings",
        description=(
            "Only the fields sent change. `match` and `evaluation` keys merge; `budget` "
            "and `objective` are replaced as a whole."
        ),
        request=InputSerializer,
        responses={200: PipelineDetailOutput},
        write=True,
        tags=["pipelines"],
    )
    def patch(self, request: Request, pipeline_slug: str) -> Response:
        return self._update(request, pipeline_slug, partial=True)


class PipelineDeleteApi(ApiView):
    @team_schema(
        summary="Delete a pipeline with its stages and rules",
        responses={204: OpenApiResponse(description="Deleted.")},
        write=True,
        tags=["pipelines"],
    )
    def delete(self, request: Request, pipeline_slug: str) -> Response:
        services.pipeline_delete(pipeline=pipeline_for_request(request, pipeline_slug, write=True))
        return Response(status=status.HTTP_204_NO_CONTENT)
