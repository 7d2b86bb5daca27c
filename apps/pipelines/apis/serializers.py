"""Serializers of the pipelines API: input fields and output representations."""

from collections.abc import Callable, Mapping
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.core.percentiles import PERCENTILES
from apps.pipelines.degrade_policy import (
    HEDGE_PERCENTILES,
    LEVERS,
    MAX_MS,
    degrade_policy_clean,
)
from apps.pipelines.models import NameMatch, Pipeline, Portion, SpanKind
from apps.pipelines.stream_budget import KEYS as STREAM_KEYS
from apps.pipelines.stream_budget import MAX_MS as STREAM_MAX_MS
from apps.pipelines.stream_budget import PERCENTILES as STREAM_PERCENTILES
from apps.pipelines.stream_budget import stream_budget_clean
from apps.pipelines.validation import EVALUATION_SETTINGS, validate_budget_mapping

# Service errors name model fields; the API reports them under its own nested names.
PIPELINE_ERROR_FIELDS = {
    "match_service": "match.service",
    "match_root_span": "match.root_span",
    "match_attributes": "match.attributes",
    "objective_target": "objective.target",
    "objective_threshold_ms": "objective.threshold_ms",
    **{f"budget_{percentile}_ms": "budget" for percentile in PERCENTILES},
    **{setting.field: f"evaluation.{setting.key}" for setting in EVALUATION_SETTINGS},
}
STAGE_ERROR_FIELDS = {"budget_ms": "budget", "budget_percentile": "budget"}

DEGRADE_SCHEMA = {
    "type": "object",
    "description": (
        "The run-time client's levers for this stage (docs/runtime.md): `levers` that may "
        "act (empty: none), `first_token_ms` for a fallback, `hedge_after` (a percentile "
        "or ms) and `cap_ms`. Empty: every lever with the stage's own figures."
    ),
    "properties": {
        "levers": {"type": "array", "items": {"enum": list(LEVERS)}, "uniqueItems": True},
        "first_token_ms": {"type": "integer", "minimum": 1, "maximum": MAX_MS},
        "hedge_after": {
            "oneOf": [
                {"type": "string", "enum": list(HEDGE_PERCENTILES)},
                {"type": "integer", "minimum": 1, "maximum": MAX_MS},
            ]
        },
        "cap_ms": {"type": "integer", "minimum": 1, "maximum": MAX_MS},
    },
    "additionalProperties": False,
    "example": {"levers": ["skip", "cap"], "cap_ms": 250},
}


class _CheckedMappingField(serializers.Field):
    """A JSON mapping checked by its one validator (``check``), errors as its messages."""

    check: Callable[[Any], dict[str, Any]]

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        try:
            return type(self).check(data)
        except DjangoValidationError as exc:
            raise serializers.ValidationError(exc.messages) from exc

    def to_representation(self, value: dict[str, Any]) -> dict[str, Any]:
        return value


@extend_schema_field(DEGRADE_SCHEMA)
class DegradePolicyField(_CheckedMappingField):
    """Checked by ``degrade_policy_clean``, the policy's one validator."""

    check = staticmethod(degrade_policy_clean)


_ONE_PERCENTILE = {
    "type": "object",
    "properties": {
        p: {"type": "integer", "minimum": 1, "maximum": STREAM_MAX_MS} for p in STREAM_PERCENTILES
    },
    "minProperties": 1,
    "maxProperties": 1,
    "additionalProperties": False,
}
STREAM_BUDGET_SCHEMA = {
    "type": "object",
    "description": (
        "Budgets on the stage's streamed answers (docs/ingestion.md, \"Models and "
        'streaming"), each at one percentile, in ms: `time_per_output_token` and '
        "`max_chunk_gap` (an answer past it stalled). Evaluated and alerted on like the "
        "stage's own budget. Empty: none."
    ),
    "properties": dict.fromkeys(STREAM_KEYS, _ONE_PERCENTILE),
    "additionalProperties": False,
    "example": {"time_per_output_token": {"p95": 40}, "max_chunk_gap": {"p99": 500}},
}


@extend_schema_field(STREAM_BUDGET_SCHEMA)
class StreamBudgetField(_CheckedMappingField):
    """Checked by ``stream_budget_clean``, the budgets' one validator."""

    check = staticmethod(stream_budget_clean)


def _pipeline_fields(data: dict[str, Any]) -> dict[str, Any]:
    """Service keyword arguments from the API's nested objects."""
    nested = ("match", "objective", "evaluation")
    fields = {key: value for key, value in data.items() if key not in nested}
    for key, value in data.get("match", {}).items():
        fields[f"match_{key}"] = value
    evaluation = data.get("evaluation", {})
    fields.update({s.field: evaluation[s.key] for s in EVALUATION_SETTINGS if s.key in evaluation})
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


class SpanConditionsInput(serializers.Serializer):
    """What a span must be for a rule to take it; the services check the rest."""

    position = serializers.IntegerField(
        min_value=0, required=False, help_text="Sort key; by default after the last rule."
    )
    span_name = serializers.CharField(max_length=500, allow_blank=True, default="")
    name_match = serializers.ChoiceField(choices=NameMatch.choices, default=NameMatch.GLOB)
    attributes = AttributesField(default=dict)
    span_kind = serializers.ChoiceField(choices=SpanKind.choices, allow_blank=True, default="")
    service = serializers.CharField(max_length=200, allow_blank=True, default="")

    class Meta:
        ref_name = "NoStageRuleInput"


class SpanRuleInput(SpanConditionsInput):
    portion = serializers.ChoiceField(choices=Portion.choices, default=Portion.WHOLE)
    first_token_event = serializers.CharField(max_length=100, default="first_token")

    class Meta:
        ref_name = "SpanRuleInput"


class NoStageRuleOutput(serializers.Serializer):
    id = serializers.IntegerField()
    position = serializers.IntegerField()
    span_name = serializers.CharField()
    name_match = serializers.ChoiceField(choices=NameMatch.choices)
    attributes = AttributesField()
    span_kind = serializers.ChoiceField(choices=SpanKind.choices)
    service = serializers.CharField()

    class Meta:
        ref_name = "NoStageRule"


class SpanRuleOutput(NoStageRuleOutput):
    portion = serializers.ChoiceField(choices=Portion.choices)
    first_token_event = serializers.CharField()

    class Meta:
        ref_name = "SpanRule"


class StageOutput(serializers.Serializer):
    slug = serializers.CharField()
    name = serializers.CharField()
    position = serializers.IntegerField()
    budget = StageBudgetField(allow_null=True)
    degrade = DegradePolicyField()
    stream_budget = StreamBudgetField()
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


EVALUATION_HELP = {
    "window_s": "Seconds of recent traces each evaluation looks at.",
    "min_samples": "Fewer samples than this in the window give no verdict.",
    "close_after": "Evaluations in a row back under budget before a violation closes.",
}


def _evaluation_help(key: str) -> str:
    setting = next(s for s in EVALUATION_SETTINGS if s.key == key)
    return (
        f"{EVALUATION_HELP[key]} {setting.minimum} to {setting.maximum}, default {setting.default}."
    )


class EvaluationOutput(serializers.Serializer):
    window_s = serializers.IntegerField(
        source="evaluation_window_s", help_text=_evaluation_help("window_s")
    )
    min_samples = serializers.IntegerField(help_text=_evaluation_help("min_samples"))
    close_after = serializers.IntegerField(help_text=_evaluation_help("close_after"))

    class Meta:
        ref_name = "PipelineEvaluation"


class PipelineOutput(serializers.Serializer):
    slug = serializers.CharField()
    name = serializers.CharField()
    description = serializers.CharField()
    match = MatchOutput(source="*")
    budget = BudgetField()
    objective = serializers.SerializerMethodField()
    evaluation = EvaluationOutput(source="*")
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
    no_stage_rules = NoStageRuleOutput(
        many=True,
        help_text="Spans that belong to no stage on purpose, with the spans inside them "
        "that no rule takes; tried after every stage's rules, in order.",
    )

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


def evaluation_defaults() -> dict[str, int]:
    return {setting.key: setting.default for setting in EVALUATION_SETTINGS}


class EvaluationInput(serializers.Serializer):
    """Budget-evaluation settings; a key left out takes its default (on PATCH: stays)."""

    def get_fields(self) -> dict[str, serializers.Field]:
        return {
            setting.key: serializers.IntegerField(
                min_value=setting.minimum,
                max_value=setting.maximum,
                default=setting.default,
                help_text=_evaluation_help(setting.key),
            )
            for setting in EVALUATION_SETTINGS
        }

    def to_internal_value(self, data: Any) -> Any:
        # A misspelt key would otherwise be dropped and its setting silently left as it was.
        if isinstance(data, Mapping):
            allowed = ", ".join(s.key for s in EVALUATION_SETTINGS)
            unknown = [key for key in data if key not in self.fields]
            if unknown:
                raise serializers.ValidationError(
                    {str(key): [f"Unknown setting; use {allowed}."] for key in unknown}
                )
        return super().to_internal_value(data)

    class Meta:
        ref_name = "PipelineEvaluationInput"
