"""Stage operations, including reorder."""

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
from apps.pipelines.access import pipeline_for_request, stage_for_request
from apps.pipelines.apis.serializers import (
    STAGE_ERROR_FIELDS,
    DegradePolicyField,
    StageBudgetField,
    StageOutput,
    StreamBudgetField,
    _stage_fields,
)
from apps.pipelines.selectors import (
    stages_for_pipeline,
)
from apps.teams.api_schema import team_schema


class StageListApi(ApiView):
    pagination_class = DefaultPagination
    FilterSet = NameOrSlugFilter

    @team_schema(
        summary="List a pipeline's stages in order",
        parameters=filterset_parameters(NameOrSlugFilter),
        responses={200: StageOutput(many=True)},
        tags=["stages"],
    )
    def get(self, request: Request, pipeline_slug: str) -> Response:
        pipeline = pipeline_for_request(request, pipeline_slug)
        stages = filter_queryset(
            filterset_class=self.FilterSet,
            request=request,
            queryset=stages_for_pipeline(pipeline=pipeline),
        )
        return paginated_response(
            request=request, view=self, queryset=stages, serializer_class=StageOutput
        )


class StageCreateApi(ApiView):
    class InputSerializer(serializers.Serializer):
        slug = serializers.CharField(max_length=50)
        name = serializers.CharField(max_length=100)
        budget = StageBudgetField(allow_null=True, default=None)
        degrade = DegradePolicyField(required=False)
        stream_budget = StreamBudgetField(required=False)

        class Meta:
            ref_name = "StageInput"

    @team_schema(
        summary="Add a stage at the end of the pipeline",
        request=InputSerializer,
        responses={201: StageOutput},
        write=True,
        tags=["stages"],
    )
    def post(self, request: Request, pipeline_slug: str) -> Response:
        pipeline = pipeline_for_request(request, pipeline_slug, write=True)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        with api_field_names(STAGE_ERROR_FIELDS):
            stage = services.stage_create(
                pipeline=pipeline, **_stage_fields(serializer.validated_data)
            )
        return Response(StageOutput(stage).data, status=status.HTTP_201_CREATED)


class StageDetailApi(ApiView):
    @team_schema(summary="A stage with its rules", responses={200: StageOutput}, tags=["stages"])
    def get(self, request: Request, pipeline_slug: str, stage_slug: str) -> Response:
        return Response(StageOutput(stage_for_request(request, pipeline_slug, stage_slug)).data)


class StageUpdateApi(ApiView):
    InputSerializer = StageCreateApi.InputSerializer

    @team_schema(
        summary="Rename a stage or change its budget",
        request=InputSerializer,
        responses={200: StageOutput},
        write=True,
        tags=["stages"],
    )
    def patch(self, request: Request, pipeline_slug: str, stage_slug: str) -> Response:
        stage = stage_for_request(request, pipeline_slug, stage_slug, write=True)
        serializer = self.InputSerializer(data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        with api_field_names(STAGE_ERROR_FIELDS):
            stage = services.stage_update(stage=stage, **_stage_fields(serializer.validated_data))
        return Response(StageOutput(stage).data)


class StageDeleteApi(ApiView):
    @team_schema(
        summary="Delete a stage and its rules",
        responses={204: OpenApiResponse(description="Deleted.")},
        write=True,
        tags=["stages"],
    )
    def delete(self, request: Request, pipeline_slug: str, stage_slug: str) -> Response:
        services.stage_delete(
            stage=stage_for_request(request, pipeline_slug, stage_slug, write=True)
        )
        return Response(status=status.HTTP_204_NO_CONTENT)


class StageReorderApi(ApiView):
    class InputSerializer(serializers.Serializer):
        order = serializers.ListField(
            child=serializers.CharField(),
            allow_empty=True,
            help_text="Every stage slug of the pipeline, once each, in the new order.",
        )

        class Meta:
            ref_name = "StageReorderInput"

    @team_schema(
        summary="Put the pipeline's stages in a new order",
        request=InputSerializer,
        responses={200: StageOutput(many=True)},
        write=True,
        tags=["stages"],
    )
    def post(self, request: Request, pipeline_slug: str) -> Response:
        pipeline = pipeline_for_request(request, pipeline_slug, write=True)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        order = serializer.validated_data["order"]
        ids = {stage.slug: stage.id for stage in stages_for_pipeline(pipeline=pipeline)}
        unknown = [slug for slug in order if slug not in ids]
        if unknown:
            raise serializers.ValidationError(
                {"order": [f"This pipeline has no stage “{slug}”." for slug in unknown]}
            )
        with api_field_names({"__all__": "order"}):
            services.stages_reorder(pipeline=pipeline, ordered_ids=[ids[slug] for slug in order])
        return Response(StageOutput(stages_for_pipeline(pipeline=pipeline), many=True).data)
