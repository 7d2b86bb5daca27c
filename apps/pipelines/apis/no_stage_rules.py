"""No-stage rule operations: spans of a pipeline that belong to no stage on purpose."""

from django_filters import CharFilter, ChoiceFilter, FilterSet
from drf_spectacular.utils import OpenApiResponse
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from apps.core.api.filters import filter_queryset
from apps.core.api.pagination import DefaultPagination, paginated_response
from apps.core.api.schema import filterset_parameters
from apps.core.api.views import ApiView
from apps.pipelines import services
from apps.pipelines.access import no_stage_rule_for_request, pipeline_for_request
from apps.pipelines.apis.serializers import NoStageRuleOutput, SpanConditionsInput
from apps.pipelines.models import NameMatch, SpanKind
from apps.pipelines.selectors import no_stage_rules_for_pipeline
from apps.teams.api_schema import team_schema

TAGS = ["no-stage rules"]
WHAT = (
    "A span a no-stage rule takes (and no stage rule does) counts in no stage, and so do "
    "the spans inside it that no rule takes: their time is untracked. Without one, such "
    "spans count in the stage of the nearest span above them that a rule took. No-stage "
    "rules are tried after every stage's rules, in order; their conditions are those of "
    "span rules, without a portion."
)


class NoStageRuleFilter(FilterSet):
    search = CharFilter(
        field_name="span_name", lookup_expr="icontains", label="Part of the span name."
    )
    service = CharFilter(field_name="service", label="The rule's service.name, exactly.")
    span_kind = ChoiceFilter(choices=[c for c in SpanKind.choices if c[0]], label="Span kind.")
    name_match = ChoiceFilter(choices=NameMatch.choices, label="How the span name is matched.")


class NoStageRuleListApi(ApiView):
    pagination_class = DefaultPagination
    FilterSet = NoStageRuleFilter

    @team_schema(
        summary="List a pipeline's no-stage rules in order",
        description=WHAT,
        parameters=filterset_parameters(NoStageRuleFilter),
        responses={200: NoStageRuleOutput(many=True)},
        tags=TAGS,
    )
    def get(self, request: Request, pipeline_slug: str) -> Response:
        pipeline = pipeline_for_request(request, pipeline_slug)
        rules = filter_queryset(
            filterset_class=self.FilterSet,
            request=request,
            queryset=no_stage_rules_for_pipeline(pipeline=pipeline),
        )
        return paginated_response(
            request=request, view=self, queryset=rules, serializer_class=NoStageRuleOutput
        )


class NoStageRuleCreateApi(ApiView):
    InputSerializer = SpanConditionsInput

    @team_schema(
        summary="Add a no-stage rule to a pipeline",
        description=f"{WHAT} A pipeline holds at most `PIPELINE_MAX_RULES` rules, its "
        "stages' and its no-stage rules together.",
        request=InputSerializer,
        responses={201: NoStageRuleOutput},
        write=True,
        tags=TAGS,
    )
    def post(self, request: Request, pipeline_slug: str) -> Response:
        pipeline = pipeline_for_request(request, pipeline_slug, write=True)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        rule = services.no_stage_rule_create(pipeline=pipeline, **serializer.validated_data)
        return Response(NoStageRuleOutput(rule).data, status=status.HTTP_201_CREATED)


class NoStageRuleDetailApi(ApiView):
    @team_schema(summary="A no-stage rule", responses={200: NoStageRuleOutput}, tags=TAGS)
    def get(self, request: Request, pipeline_slug: str, rule_id: int) -> Response:
        return Response(
            NoStageRuleOutput(no_stage_rule_for_request(request, pipeline_slug, rule_id)).data
        )


class NoStageRuleUpdateApi(ApiView):
    InputSerializer = SpanConditionsInput

    @team_schema(
        summary="Change a no-stage rule",
        request=InputSerializer,
        responses={200: NoStageRuleOutput},
        write=True,
        tags=TAGS,
    )
    def patch(self, request: Request, pipeline_slug: str, rule_id: int) -> Response:
        rule = no_stage_rule_for_request(request, pipeline_slug, rule_id, write=True)
        serializer = self.InputSerializer(data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        rule = services.no_stage_rule_update(rule=rule, **serializer.validated_data)
        return Response(NoStageRuleOutput(rule).data)


class NoStageRuleDeleteApi(ApiView):
    @team_schema(
        summary="Delete a no-stage rule",
        responses={204: OpenApiResponse(description="Deleted.")},
        write=True,
        tags=TAGS,
    )
    def delete(self, request: Request, pipeline_slug: str, rule_id: int) -> Response:
        services.no_stage_rule_delete(
            rule=no_stage_rule_for_request(request, pipeline_slug, rule_id, write=True)
        )
        return Response(status=status.HTTP_204_NO_CONTENT)
