"""Alert rule operations, silences included. Rules name their pipeline, stage and
channels by slug; a slug that is not the team's is a 400 naming the field."""

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from apps.alerts.access import rule_for_request, team_for_request
from apps.alerts.apis.fields import (
    MAX_RULE_CHANNELS,
    VIOLATION_AT_ONCE,
    ConditionField,
    ScopeField,
    StrictInput,
)
from apps.alerts.apis.serializers import (
    AlertRuleOutput,
)
from apps.alerts.models import AlertRule, NoDataPolicy, RuleScope, Severity
from apps.alerts.selectors.history import channels_for_team, rules_for_team
from apps.alerts.services.rules import (
    alert_rule_create,
    alert_rule_delete,
    alert_rule_silence,
    alert_rule_unsilence,
    alert_rule_update,
)
from apps.core.api.errors import api_field_names
from apps.core.api.pagination import DefaultPagination, paginated_response
from apps.core.api.views import ApiView
from apps.pipelines.models import Pipeline
from apps.pipelines.selectors import pipelines_for_team, stages_for_pipeline
from apps.teams.api_schema import team_schema
from apps.teams.models import Team

TAGS = ["alert rules"]
# Service errors name model fields; the API reports them under its own names.
RULE_ERRORS = {
    "stage": "scope",
    "violation_for_minutes": "condition",
    "violation_factor": "condition",
    "violation_percentile": "condition",
    "burn_windows": "condition",
    "degradation_percent": "condition",
}
CREATE_ERRORS = {**RULE_ERRORS, "__all__": "slug"}
SILENCE_ERRORS = {"silenced_until": "until", "silence_reason": "reason"}


@dataclass(frozen=True)
class RuleItem:
    rule: AlertRule
    channels: list[str]
    states: list[dict[str, Any]]


def _state_scope(scope_key: str, stage_slugs: Mapping[int, str]) -> str:
    number = scope_key.removeprefix("stage:")
    if number != scope_key and number.isdigit() and int(number) in stage_slugs:
        return f"stage:{stage_slugs[int(number)]}"
    return scope_key


def rule_item(rule: AlertRule) -> RuleItem:
    stage_slugs = {stage.pk: stage.slug for stage in rule.pipeline.stages.all()}
    states = [
        {
            "scope": _state_scope(state.scope_key, stage_slugs),
            "status": state.status,
            "condition_since": state.condition_since,
            "changed_at": state.changed_at,
            "evaluated_at": state.evaluated_at,
            "incident": state.incident_id,
        }
        for state in sorted(rule.states.all(), key=lambda s: s.scope_key)
    ]
    return RuleItem(rule, [channel.slug for channel in rule.channels.all()], states)


def _references(team: Team, data: dict[str, Any], rule: AlertRule | None) -> dict[str, Any]:
    """The input with its slugs made objects of ``team``, in the services' field names."""
    fields = {key: value for key, value in data.items() if key not in ("condition", "scope")}
    fields.update(data.get("condition", VIOLATION_AT_ONCE if rule is None else {}))
    errors: dict[str, list[str]] = {}
    pipeline: Pipeline | None = rule.pipeline if rule is not None else None
    if "pipeline" in data:
        pipeline = pipelines_for_team(team=team).filter(slug=data["pipeline"]).first()
        if pipeline is None:
            errors["pipeline"] = [f"No pipeline “{data['pipeline']}” in this team."]
        fields["pipeline"] = pipeline
    scope: str | None = data.get("scope")
    if scope is None and rule is not None and "pipeline" in data and rule.stage is not None:
        scope = f"stage:{rule.stage.slug}"  # the same stage, in the pipeline named now
    if scope is not None and pipeline is not None:
        stage_slug = scope.removeprefix("stage:")
        fields["scope"] = RuleScope.STAGE if stage_slug != scope else scope
        fields["stage"] = None
        if stage_slug != scope:
            fields["stage"] = stages_for_pipeline(pipeline=pipeline).filter(slug=stage_slug).first()
            if fields["stage"] is None:
                errors["scope"] = [f"Pipeline “{pipeline.slug}” has no stage “{stage_slug}”."]
    if "channels" in data:
        slugs = list(dict.fromkeys(data["channels"]))
        found = {c.slug: c for c in channels_for_team(team=team).filter(slug__in=slugs)}
        missing = [slug for slug in slugs if slug not in found]
        if missing:
            errors["channels"] = [f"No channel “{slug}” in this team." for slug in missing]
        fields["channels"] = [found[slug] for slug in slugs if slug in found]
    if errors:
        raise serializers.ValidationError(errors)
    return fields


class AlertRuleListApi(ApiView):
    pagination_class = DefaultPagination

    @team_schema(
        summary="List the team's alert rules",
        description="Each with its state per scope (ok, pending, firing) and its silence.",
        responses={200: AlertRuleOutput(many=True)},
        tags=TAGS,
    )
    def get(self, request: Request) -> Response:
        rules = rules_for_team(team=team_for_request(request)).prefetch_related("pipeline__stages")
        return paginated_response(
            request=request,
            view=self,
            queryset=rules,
            serializer_class=AlertRuleOutput,
            rows=lambda page: [rule_item(rule) for rule in page],
        )


class AlertRuleCreateApi(ApiView):
    class InputSerializer(StrictInput):
        slug = serializers.CharField(max_length=50)
        name = serializers.CharField(max_length=100, allow_blank=True, default="")
        pipeline = serializers.CharField(max_length=50, help_text="The slug of a pipeline.")
        scope = ScopeField(default=RuleScope.E2E)
        condition = ConditionField(
            required=False, help_text="Left out on create: a violation fires the rule at once."
        )
        severity = serializers.ChoiceField(choices=Severity.choices, default=Severity.WARNING)
        channels = serializers.ListField(
            child=serializers.CharField(max_length=50),
            max_length=MAX_RULE_CHANNELS,
            default=list,
            help_text="Channel slugs.",
        )
        # Whole numbers read here; their bounds are alert_rule_clean's, through the services.
        renotify_minutes = serializers.IntegerField(
            default=240, help_text="A reminder while firing; 0 never (at most a week: 10080)."
        )
        notify_on_resolve = serializers.BooleanField(default=True)
        no_data = serializers.ChoiceField(
            choices=NoDataPolicy.choices, default=NoDataPolicy.RESOLVE
        )
        no_data_after_s = serializers.IntegerField(
            allow_null=True,
            default=None,
            help_text="Without a verdict this long a scope has no data, 30 to 86400; null: three "
            "windows.",
        )
        enabled = serializers.BooleanField(default=True)

        class Meta:
            ref_name = "AlertRuleInput"

    @team_schema(
        summary="Create an alert rule",
        description=(
            "`scope` is `e2e`, `any_stage` or `stage:<slug>`; `condition` a violation "
            "held for some minutes (optionally only at a factor of the budget), the "
            "objective's burn rate, or a degradation rate (the share of requests a run-time "
            "client degraded) over a percentage for some minutes; `channels` channel slugs."
        ),
        request=InputSerializer,
        responses={201: AlertRuleOutput},
        write=True,
        tags=TAGS,
    )
    def post(self, request: Request) -> Response:
        team = team_for_request(request, write=True)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        fields = _references(team, serializer.validated_data, None)
        with api_field_names(CREATE_ERRORS):
            rule = alert_rule_create(team=team, **fields)
        return Response(AlertRuleOutput(rule_item(rule)).data, status=status.HTTP_201_CREATED)


class AlertRuleDetailApi(ApiView):
    @team_schema(summary="One alert rule", responses={200: AlertRuleOutput}, tags=TAGS)
    def get(self, request: Request, rule_slug: str) -> Response:
        return Response(AlertRuleOutput(rule_item(rule_for_request(request, rule_slug))).data)


class AlertRuleUpdateApi(ApiView):
    class InputSerializer(AlertRuleCreateApi.InputSerializer):
        fixed = {"slug": "The slug of a rule cannot change; create another."}

        def get_fields(self) -> dict[str, serializers.Field]:
            fields = super().get_fields()
            del fields["slug"]
            return fields

        class Meta:
            ref_name = "AlertRuleUpdateInput"

    @team_schema(
        summary="Change an alert rule",
        description=(
            "Only the fields sent change; a `condition` sent replaces the whole condition. "
            "A new pipeline, scope or condition, or `enabled: false`, closes what the rule "
            "has firing without notifying."
        ),
        request=InputSerializer,
        responses={200: AlertRuleOutput},
        write=True,
        tags=TAGS,
    )
    def patch(self, request: Request, rule_slug: str) -> Response:
        rule = rule_for_request(request, rule_slug, write=True)
        serializer = self.InputSerializer(data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        fields = _references(rule.team, serializer.validated_data, rule)
        with api_field_names(RULE_ERRORS):
            rule = alert_rule_update(rule=rule, channels=fields.pop("channels", None), **fields)
        return Response(AlertRuleOutput(rule_item(rule)).data)


class AlertRuleDeleteApi(ApiView):
    @team_schema(
        summary="Delete an alert rule",
        description="Its firing incidents are closed without notifying; the history keeps them.",
        responses={204: OpenApiResponse(description="Deleted.")},
        write=True,
        tags=TAGS,
    )
    def delete(self, request: Request, rule_slug: str) -> Response:
        alert_rule_delete(rule=rule_for_request(request, rule_slug, write=True))
        return Response(status=status.HTTP_204_NO_CONTENT)


class AlertRuleSilenceApi(ApiView):
    class InputSerializer(StrictInput):
        until = serializers.DateTimeField(
            help_text="When notifications start again, under 90 days."
        )
        reason = serializers.CharField(max_length=500, help_text="Why, for whoever wonders later.")

        class Meta:
            ref_name = "SilenceInput"

    @team_schema(
        summary="Silence an alert rule until a time",
        description="It keeps evaluating and recording incidents, and notifies nobody.",
        request=InputSerializer,
        responses={200: AlertRuleOutput},
        write=True,
        tags=TAGS,
    )
    def post(self, request: Request, rule_slug: str) -> Response:
        rule = rule_for_request(request, rule_slug, write=True)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        until: datetime = serializer.validated_data["until"]
        with api_field_names(SILENCE_ERRORS):
            rule = alert_rule_silence(
                rule=rule, until=until, reason=serializer.validated_data["reason"]
            )
        return Response(AlertRuleOutput(rule_item(rule)).data)


class AlertRuleUnsilenceApi(ApiView):
    @team_schema(
        summary="End an alert rule's silence",
        responses={204: OpenApiResponse(description="It notifies again.")},
        write=True,
        tags=TAGS,
    )
    def delete(self, request: Request, rule_slug: str) -> Response:
        alert_rule_unsilence(rule=rule_for_request(request, rule_slug, write=True))
        return Response(status=status.HTTP_204_NO_CONTENT)
