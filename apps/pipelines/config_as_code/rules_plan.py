"""Diff of span rules, a stage's and a pipeline's no-stage rules, as plan steps.

Rules have no identity of their own: a stage's rules are its list, and so are a
pipeline's no-stage rules; rows are reused by position.
"""

import json
from typing import Any

from apps.pipelines.attribute_json import canonical_attributes
from apps.pipelines.config_as_code.pipelines_schema import PipelineSpec, RuleSpec
from apps.pipelines.config_as_code.steps import Step
from apps.pipelines.models import NameMatch, NoStageRule, Pipeline, SpanConditions, SpanRule, Stage
from apps.pipelines.services import (
    no_stage_rule_create,
    no_stage_rule_delete,
    no_stage_rule_update,
    span_rule_create,
    span_rule_delete,
    span_rule_update,
)


def compared_json(value: Any) -> str:
    """A value as the plan compares it. Type-aware: 1, 1.0 and true are different
    attribute values. Compared as jsonb keeps them, so that -0.0 in a file is the 0.0
    that was stored."""
    if isinstance(value, dict):
        value = canonical_attributes(value)
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def rule_key(fields: dict[str, Any]) -> str:
    fields = dict(fields)
    if not fields["span_name"]:
        # Without a name the match mode means nothing; do not report it as a change.
        fields["name_match"] = NameMatch.GLOB
    fields["attributes"] = canonical_attributes(fields["attributes"])
    return compared_json(fields)


def _condition_fields(rule: SpanConditions) -> dict[str, Any]:
    return {
        "span_name": rule.span_name,
        "name_match": rule.name_match,
        "attributes": rule.attributes,
        "span_kind": rule.span_kind,
        "service": rule.service,
    }


def rule_fields(rule: SpanRule) -> dict[str, Any]:
    return {
        **_condition_fields(rule),
        "portion": rule.portion,
        "first_token_event": rule.first_token_event,
    }


def rules_diff(
    old: list[dict[str, Any]], new: list[dict[str, Any]], model: type[SpanConditions] = SpanRule
) -> str:
    """The rules that differ, by position: ``#2 name = a* -> name = b*``."""

    def shown(rules: list[dict[str, Any]], index: int) -> str:
        return model(**rules[index]).describe() if index < len(rules) else "(none)"

    return "; ".join(
        f"#{index + 1} {shown(old, index)} -> {shown(new, index)}"
        for index in range(max(len(old), len(new)))
        if index >= len(old) or index >= len(new) or rule_key(old[index]) != rule_key(new[index])
    )


def rules_sync(stage: Stage, specs: list[RuleSpec]) -> None:
    """Make the stage's rules equal ``specs``, in order, reusing rows by position."""
    existing = list(stage.rules.order_by("position", "id"))
    # Surplus rows go first, so that a pipeline at its rule cap can change its rules.
    for rule in existing[len(specs) :]:
        span_rule_delete(rule=rule)
    for position, spec in enumerate(specs):
        fields = spec.fields()
        if position >= len(existing):
            span_rule_create(stage=stage, position=position, **fields)
            continue
        rule = existing[position]
        if rule.position != position or rule_key(rule_fields(rule)) != rule_key(fields):
            span_rule_update(rule=rule, position=position, **fields)


def no_stage_sync(pipeline: Pipeline, specs: list[RuleSpec]) -> None:
    """Make the pipeline's no-stage rules equal ``specs``, in order, reusing rows by position."""
    existing = list(NoStageRule.objects.filter(pipeline=pipeline).order_by("position", "id"))
    for rule in existing[len(specs) :]:
        no_stage_rule_delete(rule=rule)
    for position, spec in enumerate(specs):
        fields = spec.conditions()
        if position >= len(existing):
            no_stage_rule_create(pipeline=pipeline, position=position, **fields)
            continue
        rule = existing[position]
        if rule.position != position or rule_key(_condition_fields(rule)) != rule_key(fields):
            no_stage_rule_update(rule=rule, position=position, **fields)


def no_stage_step(pipeline: Pipeline, spec: PipelineSpec) -> Step | None:
    old_rules = [_condition_fields(rule) for rule in pipeline.no_stage_rules.all()]
    new_rules = [rule.conditions() for rule in spec.no_stage]
    if [rule_key(r) for r in old_rules] == [rule_key(r) for r in new_rules]:
        return None
    return Step(
        [f"~ no_stage {pipeline.slug}: {rules_diff(old_rules, new_rules, NoStageRule)}"],
        lambda team: no_stage_sync(pipeline, spec.no_stage),
        spec.no_stage[0].line if spec.no_stage else spec.line,
    )
