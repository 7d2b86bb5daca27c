"""REST API for a team's pipelines, their stages and span rules.

One view per operation, each with its input serializer; writes go through the
services, reads through the selectors. The team comes from apps.core.api.team.
"""

from typing import Any

from django.shortcuts import get_object_or_404
from django_filters import CharFilter, ChoiceFilter, FilterSet
from drf_spectacular.utils import OpenApiResponse, extend_schema_field
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from apps.core.api.errors import api_field_names
from apps.core.api.filters import NameOrSlugFilter, filter_queryset
from apps.core.api.pagination import DefaultPagination, paginated_response
from apps.core.api.schema import filterset_parameters, team_schema
from apps.core.api.team import membership_for_request, team_slug_for_request
from apps.core.api.views import ApiView
from apps.pipelines import services
from apps.pipelines.access import pipeline_for_user, span_rule_for_stage
from apps.pipelines.models import (
    PERCENTILES,
    NameMatch,
    Pipeline,
    Portion,
    SpanKind,
    SpanRule,
    Stage,
)
from apps.pipelines.selectors import (
    pipeline_with_stages,
    pipelines_for_team,
    span_rules_for_stage,
    stages_for_pipeline,
)
from apps.pipelines.validation import validate_budget_mapping

# Service errors name model fields; the API reports them under its own nested names.
PIPELINE_ERROR_FIELDS = {
    "match_service": "match.service",
    "match_root_span": "match.root_span",
    "match_attributes": "match.attributes",
    "objective_target": "objective.target",
    "objective_threshold_ms": "objective.threshold_ms",
    **{f"budget_{percentile}_ms": "budget" for percentile in PERCENTILES},
}
STAGE_ERROR_FIELDS = {"budget_ms": "budget", "budget_percentile": "budget"}


def _pipeline(request: Request, pipeline_slug: str, *, write: bool = False) -> Pipeline:
    _, pipeline = pipeline_for_user(
        user=request.user,
        team_slug=team_slug_for_request(request),
        pipeline_slug=pipeline_slug,
        write=write,
    )
    return pipeline


def _stage(request: Request, pipeline_slug: str, stage_slug: str, *, write: bool = False) -> Stage:
    pipeline = _pipeline(request, pipeline_slug, write=write)
    return get_object_or_404(
        Stage.objects.select_related("pipeline"), pipeline=pipeline, slug=stage_slug
    )


def _rule(
    request: Request, pipeline_slug: str, stage_slug: str, rule_id: int, *, write: bool = False
) -> SpanRule:
    stage = _stage(request, pipeline_slug, stage_slug, write=write)
    return span_rule_for_stage(stage=stage, rule_id=rule_id)


def _pipeline_fields(data: dict[str, Any]) -> dict[str, Any]:
    """Service keyword arguments from the API's nested ``match`` and ``objective``."""
    fields = {key: value for key, value in data.items() if key not in ("match", "objective")}
    for key, value in data.get("match", {}).items():
        fields[f"match_{key}"] = value
    if "objective" in data:
        objective = data["objective"] or {}
        fields["objective_target"] = objective.get("target")
        fields["objective_threshold_ms"] = objective.get("threshold_ms")
    return fields


def _stage_fields(data: dict[str, Any]) -> dict[str, Any]:
    fields = {key: value for key, value in data.items() if key != "budget"}
    if "budget" in data:
        budget = data["budget"] or {}
        fields["budget_ms"] = None
        for percentile, ms in budget.items():
            fields.update(budget_percentile=percentile, budget_ms=ms)
    return fields


# --- Fields and the representations several operations return ---------------------------

BUDGET_SCHEMA = {
    "type": "object",
    "properties": {p: {"type": "integer", "minimum": 1, "maximum": 3_600_000} for p in PERCENTILES},
    "additionalProperties": False,
    "minProperties": 1,
}


@extend_schema_field({**BUDGET_SCHEMA, "example": {"p95": 2500}})
class BudgetField(serializers.Field):
    """Whole milliseconds by percentile, e.g. ``{"p95": 2500, "p99": 4000}``."""

    single = False

    def to_internal_value(self, data: Any) -> dict[str, int]:
        return validate_budget_mapping(data, single=self.single)

    def to_representation(self, value: dict[str, int]) -> dict[str, int] | None:
        return value or None


@extend_schema_field({**BUDGET_SCHEMA, "maxProperties": 1, "example": {"p95": 350}})
class StageBudgetField(BudgetField):
    single = True


@extend_schema_field(
    {
        "type": "object",
        "additionalProperties": {
            "oneOf": [{"type": "string"}, {"type": "number"}, {"type": "boolean"}]
        },
        "example": {"gen_ai.operation.name": "embeddings"},
    }
)
class AttributesField(serializers.JSONField):
    """Attribute equalities: attribute key to a string, number or boolean."""


class SpanRuleOutput(serializers.Serializer):
    id = serializers.IntegerField()
    position = serializers.IntegerField()
    span_name = serializers.CharField()
    name_match = serializers.ChoiceField(choices=NameMatch.choices)
    attributes = AttributesField()
    span_kind = serializers.ChoiceField(choices=SpanKind.choices)
    service = serializers.CharField()
    portion = serializers.ChoiceField(choices=Portion.choices)
    first_token_event = serializers.CharField()

    class Meta:
        ref_name = "SpanRule"


class StageOutput(serializers.Serializer):
    slug = serializers.CharField()
    name = serializers.CharField()
    position = serializers.IntegerField()
    budget = StageBudgetField(allow_null=True)
    rules = SpanRuleOutput(many=True)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    class Meta:
        ref_name = "Stage"


class MatchOutput(serializers.Serializer):
    service = serializers.CharField(source="match_service")
    root_span = serializers.CharField(source="match_root_span")
    attributes = AttributesField(source="match_attributes")

    class Meta:
        ref_name = "PipelineMatch"


class ObjectiveOutput(serializers.Serializer):
    target = serializers.DecimalField(
        max_digits=6, decimal_places=3, coerce_to_string=False, source="objective_target"
    )
    threshold_ms = serializers.IntegerField(source="objective_threshold_ms")

    class Meta:
        ref_name = "PipelineObjective"


class PipelineOutput(serializers.Serializer):
    slug = serializers.CharField()
    name = serializers.CharField()
    description = serializers.CharField()
    match = MatchOutput(source="*")
    budget = BudgetField()
    objective = serializers.SerializerMethodField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    class Meta:
        ref_name = "Pipeline"

    @extend_schema_field(ObjectiveOutput(allow_null=True))
    def get_objective(self, pipeline: Pipeline) -> dict[str, Any] | None:
        if pipeline.objective_target is None:
            return None
        return ObjectiveOutput(pipeline).data


class PipelineSummaryOutput(PipelineOutput):
    stage_count = serializers.IntegerField()

    class Meta:
        ref_name = "PipelineSummary"


class PipelineDetailOutput(PipelineOutput):
    stages = StageOutput(many=True)

    class Meta:
        ref_name = "PipelineDetail"


class MatchInput(serializers.Serializer):
    service = serializers.CharField(max_length=200, allow_blank=True, default="")
    root_span = serializers.CharField(max_length=200, allow_blank=True, default="")
    attributes = AttributesField(default=dict)

    class Meta:
        ref_name = "PipelineMatchInput"


class ObjectiveInput(serializers.Serializer):
    target = serializers.DecimalField(
        max_digits=6,
        decimal_places=3,
        coerce_to_string=False,
        help_text="Percent of requests that should finish under the threshold.",
    )
    threshold_ms = serializers.IntegerField()

    class Meta:
        ref_name = "PipelineObjectiveInput"


# --- Pipelines ----------------------------------------------------------------------------


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


class PipelineCreateApi(ApiView):
    class InputSerializer(serializers.Serializer):
        slug = serializers.CharField(max_length=50)
        name = serializers.CharField(max_length=100)
        description = serializers.CharField(allow_blank=True, default="")
        match = MatchInput(default=lambda: {"service": "", "root_span": "", "attributes": {}})
        budget = BudgetField()
        objective = ObjectiveInput(allow_null=True, default=None)

        class Meta:
            ref_name = "PipelineInput"

    @team_schema(
        summary="Create a pipeline",
        request=InputSerializer,
        responses={201: PipelineDetailOutput},
        write=True,
        tags=["pipelines"],
    )
    def post(self, request: Request) -> Response:
        membership = membership_for_request(request, write=True)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        with api_field_names(PIPELINE_ERROR_FIELDS):
            pipeline = services.pipeline_create(
                team=membership.team, **_pipeline_fields(serializer.validated_data)
            )
        data = PipelineDetailOutput(pipeline_with_stages(pipeline=pipeline)).data
        return Response(data, status=status.HTTP_201_CREATED)


class PipelineDetailApi(ApiView):
    @team_schema(
        summary="A pipeline with its stages and their rules",
        responses={200: PipelineDetailOutput},
        tags=["pipelines"],
    )
    def get(self, request: Request, pipeline_slug: str) -> Response:
        pipeline = _pipeline(request, pipeline_slug)
        return Response(PipelineDetailOutput(pipeline_with_stages(pipeline=pipeline)).data)


class PipelineUpdateApi(ApiView):
    InputSerializer = PipelineCreateApi.InputSerializer

    def _update(self, request: Request, pipeline_slug: str, *, partial: bool) -> Response:
        pipeline = _pipeline(request, pipeline_slug, write=True)
        serializer = self.InputSerializer(data=request.data, partial=partial)
        serializer.is_valid(raise_exception=True)
        with api_field_names(PIPELINE_ERROR_FIELDS):
            pipeline = services.pipeline_update(
                pipeline=pipeline, **_pipeline_fields(serializer.validated_data)
            )
        return Response(PipelineDetailOutput(pipeline_with_stages(pipeline=pipeline)).data)

    @team_schema(
        summary="Replace a pipeline's settings",
        description="Fields left out take their defaults; `budget` replaces the whole budget.",
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
            "Only the fields sent change. `match` keys merge; `budget` and `objective` "
            "are replaced as a whole."
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
        services.pipeline_delete(pipeline=_pipeline(request, pipeline_slug, write=True))
        return Response(status=status.HTTP_204_NO_CONTENT)


# --- Stages -------------------------------------------------------------------------------


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
        pipeline = _pipeline(request, pipeline_slug)
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
        pipeline = _pipeline(request, pipeline_slug, write=True)
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
        return Response(StageOutput(_stage(request, pipeline_slug, stage_slug)).data)


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
        stage = _stage(request, pipeline_slug, stage_slug, write=True)
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
        services.stage_delete(stage=_stage(request, pipeline_slug, stage_slug, write=True))
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
        pipeline = _pipeline(request, pipeline_slug, write=True)
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


# --- Span rules ---------------------------------------------------------------------------


class SpanRuleFilter(FilterSet):
    search = CharFilter(
        field_name="span_name", lookup_expr="icontains", label="Part of the span name."
    )
    service = CharFilter(field_name="service", label="The rule's service.name, exactly.")
    span_kind = ChoiceFilter(choices=[c for c in SpanKind.choices if c[0]], label="Span kind.")
    name_match = ChoiceFilter(choices=NameMatch.choices, label="How the span name is matched.")
    portion = ChoiceFilter(choices=Portion.choices, label="Which part of the span counts.")


class SpanRuleListApi(ApiView):
    pagination_class = DefaultPagination
    FilterSet = SpanRuleFilter

    @team_schema(
        summary="List a stage's span rules in order",
        parameters=filterset_parameters(SpanRuleFilter),
        responses={200: SpanRuleOutput(many=True)},
        tags=["span rules"],
    )
    def get(self, request: Request, pipeline_slug: str, stage_slug: str) -> Response:
        stage = _stage(request, pipeline_slug, stage_slug)
        rules = filter_queryset(
            filterset_class=self.FilterSet,
            request=request,
            queryset=span_rules_for_stage(stage=stage),
        )
        return paginated_response(
            request=request, view=self, queryset=rules, serializer_class=SpanRuleOutput
        )


class SpanRuleCreateApi(ApiView):
    class InputSerializer(serializers.Serializer):
        position = serializers.IntegerField(
            min_value=0, required=False, help_text="Sort key; by default after the last rule."
        )
        span_name = serializers.CharField(max_length=500, allow_blank=True, default="")
        name_match = serializers.ChoiceField(choices=NameMatch.choices, default=NameMatch.GLOB)
        attributes = AttributesField(default=dict)
        span_kind = serializers.ChoiceField(choices=SpanKind.choices, allow_blank=True, default="")
        service = serializers.CharField(max_length=200, allow_blank=True, default="")
        portion = serializers.ChoiceField(choices=Portion.choices, default=Portion.WHOLE)
        first_token_event = serializers.CharField(max_length=100, default="first_token")

        class Meta:
            ref_name = "SpanRuleInput"

    @team_schema(
        summary="Add a span rule to a stage",
        request=InputSerializer,
        responses={201: SpanRuleOutput},
        write=True,
        tags=["span rules"],
    )
    def post(self, request: Request, pipeline_slug: str, stage_slug: str) -> Response:
        stage = _stage(request, pipeline_slug, stage_slug, write=True)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        rule = services.span_rule_create(stage=stage, **serializer.validated_data)
        return Response(SpanRuleOutput(rule).data, status=status.HTTP_201_CREATED)


class SpanRuleDetailApi(ApiView):
    @team_schema(summary="A span rule", responses={200: SpanRuleOutput}, tags=["span rules"])
    def get(self, request: Request, pipeline_slug: str, stage_slug: str, rule_id: int) -> Response:
        return Response(SpanRuleOutput(_rule(request, pipeline_slug, stage_slug, rule_id)).data)


class SpanRuleUpdateApi(ApiView):
    InputSerializer = SpanRuleCreateApi.InputSerializer

    @team_schema(
        summary="Change a span rule",
        request=InputSerializer,
        responses={200: SpanRuleOutput},
        write=True,
        tags=["span rules"],
    )
    def patch(
        self, request: Request, pipeline_slug: str, stage_slug: str, rule_id: int
    ) -> Response:
        rule = _rule(request, pipeline_slug, stage_slug, rule_id, write=True)
        serializer = self.InputSerializer(data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        rule = services.span_rule_update(rule=rule, **serializer.validated_data)
        return Response(SpanRuleOutput(rule).data)


class SpanRuleDeleteApi(ApiView):
    @team_schema(
        summary="Delete a span rule",
        responses={204: OpenApiResponse(description="Deleted.")},
        write=True,
        tags=["span rules"],
    )
    def delete(
        self, request: Request, pipeline_slug: str, stage_slug: str, rule_id: int
    ) -> Response:
        services.span_rule_delete(
            rule=_rule(request, pipeline_slug, stage_slug, rule_id, write=True)
        )
        return Response(status=status.HTTP_204_NO_CONTENT)
