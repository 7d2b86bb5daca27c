"""Span rule operations."""

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
from apps.pipelines.access import span_rule_for_request, stage_for_request
from apps.pipelines.apis.serializers import SpanRuleInput, SpanRuleOutput
from apps.pipelines.models import (
    NameMatch,
    Portion,
    SpanKind,
)
from apps.pipelines.selectors import (
    span_rules_for_stage,
)
from apps.teams.api_schema import team_schema


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
        stage = stage_for_request(request, pipeline_slug, stage_slug)
        rules = filter_queryset(
            filterset_class=self.FilterSet,
            request=request,
            queryset=span_rules_for_stage(stage=stage),
        )
        return paginated_response(
            request=request, view=self, queryset=rules, serializer_class=SpanRuleOutput
        )


class SpanRuleCreateApi(ApiView):
    InputSerializer = SpanRuleInput

    @team_schema(
        summary="Add a span rule to a stage",
        request=InputSerializer,
        responses={201: SpanRuleOutput},
        write=True,
        tags=["span rules"],
    )
    def post(self, request: Request, pipeline_slug: str, stage_slug: str) -> Response:
        stage = stage_for_request(request, pipeline_slug, stage_slug, write=True)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        rule = services.span_rule_create(stage=stage, **serializer.validated_data)
        return Response(SpanRuleOutput(rule).data, status=status.HTTP_201_CREATED)


class SpanRuleDetailApi(ApiView):
    @team_schema(summary="A span rule", responses={200: SpanRuleOutput}, tags=["span rules"])
    def get(self, request: Request, pipeline_slug: str, stage_slug: str, rule_id: int) -> Response:
        return Response(
            SpanRuleOutput(span_rule_for_request(request, pipeline_slug, stage_slug, rule_id)).data
        )


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
        rule = span_rule_for_request(request, pipeline_slug, stage_slug, rule_id, write=True)
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
            rule=span_rule_for_request(request, pipeline_slug, stage_slug, rule_id, write=True)
        )
        return Response(status=status.HTTP_204_NO_CONTENT)
