"""The ``pipelines:`` section as data, minimal: defaults and empty values are left out."""

from typing import Any

from apps.pipelines.config_as_code.pipelines_schema import DEFAULT_FIRST_TOKEN_EVENT
from apps.pipelines.config_as_code.selectors import pipelines_for_config
from apps.pipelines.models import NameMatch, Pipeline, Portion, SpanConditions, SpanRule, Stage
from apps.pipelines.validation import EVALUATION_SETTINGS
from apps.teams.models import Team


def _conditions(rule: SpanConditions) -> dict[str, Any]:
    data: dict[str, Any] = {}
    if rule.span_name:
        key = "span_name_regex" if rule.name_match == NameMatch.REGEX else "span_name"
        data[key] = rule.span_name
    if rule.attributes:
        data["attributes"] = dict(sorted(rule.attributes.items()))
    if rule.span_kind:
        data["span_kind"] = rule.span_kind
    if rule.service:
        data["service"] = rule.service
    return data


def _rule(rule: SpanRule) -> dict[str, Any]:
    data = _conditions(rule)
    if rule.portion != Portion.WHOLE:
        data["portion"] = rule.portion
    if rule.first_token_event != DEFAULT_FIRST_TOKEN_EVENT:
        data["first_token_event"] = rule.first_token_event
    return data


def _stage(stage: Stage) -> dict[str, Any]:
    data: dict[str, Any] = {"slug": stage.slug, "name": stage.name}
    if stage.budget_ms is not None:
        data["budget"] = {stage.budget_percentile: stage.budget_ms}
    if stage.stream_budget:
        data["stream_budget"] = {key: dict(value) for key, value in stage.stream_budget.items()}
    if stage.degrade:
        data["degrade"] = dict(stage.degrade)
    rules = [_rule(rule) for rule in stage.rules.all()]
    if rules:
        data["match"] = rules
    return data


def _pipeline(pipeline: Pipeline) -> dict[str, Any]:
    data: dict[str, Any] = {"slug": pipeline.slug, "name": pipeline.name}
    if pipeline.description:
        data["description"] = pipeline.description
    match: dict[str, Any] = {}
    if pipeline.match_service:
        match["service"] = pipeline.match_service
    if pipeline.match_root_span:
        match["root_span"] = pipeline.match_root_span
    if pipeline.match_attributes:
        match["attributes"] = dict(sorted(pipeline.match_attributes.items()))
    if match:
        data["match"] = match
    data["budget"] = pipeline.budget
    if pipeline.objective_target is not None and pipeline.objective_threshold_ms is not None:
        data["objective"] = {
            "target": float(pipeline.objective_target),
            "threshold_ms": pipeline.objective_threshold_ms,
        }
    evaluation = {
        setting.key: getattr(pipeline, setting.field)
        for setting in EVALUATION_SETTINGS
        if getattr(pipeline, setting.field) != setting.default
    }
    if evaluation:
        data["evaluation"] = evaluation
    stages = [_stage(stage) for stage in pipeline.stages.all()]
    if stages:
        data["stages"] = stages
    no_stage = [_conditions(rule) for rule in pipeline.no_stage_rules.all()]
    if no_stage:
        data["no_stage"] = no_stage
    return data


def export_pipelines(team: Team) -> list[dict[str, Any]]:
    return [_pipeline(pipeline) for pipeline in pipelines_for_config(team=team)]
