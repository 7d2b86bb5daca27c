"""Diff of the ``pipelines:`` section against the database, as steps that call the services."""

import json
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from apps.core.percentiles import PERCENTILES
from apps.pipelines.config_as_code.pipelines_schema import (
    PipelineSpec,
    PipelinesSpec,
    StageSpec,
)
from apps.pipelines.config_as_code.rules_plan import (
    compared_json,
    no_stage_step,
    no_stage_sync,
    rule_fields,
    rule_key,
    rules_diff,
    rules_sync,
)
from apps.pipelines.config_as_code.selectors import pipelines_for_config
from apps.pipelines.config_as_code.steps import Plan, PlanOptions, Step
from apps.pipelines.degrade_policy import degrade_policy_text
from apps.pipelines.models import NoStageRule, Pipeline, Stage
from apps.pipelines.services import (
    pipeline_create,
    pipeline_delete,
    pipeline_update,
    stage_create,
    stage_delete,
    stage_update,
    stages_reorder,
)
from apps.pipelines.stream_budget import stream_budget_text
from apps.pipelines.validation import EVALUATION_SETTINGS
from apps.teams.models import Team


def _shown(value: Any) -> str:
    if value in (None, "", {}):
        return "(none)"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, dict):
        return compared_json(value)
    return str(value)


def _objective(target: Decimal | None, threshold: int | None) -> str:
    if target is None or threshold is None:
        return "(none)"
    return f"{target.normalize():f}% under {threshold} ms"


def _pipeline_fields(spec: PipelineSpec) -> dict[str, Any]:
    return {
        "name": spec.name,
        "description": spec.description,
        "match_service": spec.match_service,
        "match_root_span": spec.match_root_span,
        "match_attributes": dict(spec.match_attributes),
        "objective_target": spec.objective_target,
        "objective_threshold_ms": spec.objective_threshold_ms,
        **spec.evaluation,
    }


def _pipeline_differences(pipeline: Pipeline, spec: PipelineSpec) -> list[str]:
    changes = []
    for field, label in (
        ("name", "name"),
        ("match_service", "match.service"),
        ("match_root_span", "match.root_span"),
    ):
        old, new = getattr(pipeline, field), getattr(spec, field)
        if old != new:
            changes.append(f"{label} {_shown(old)} -> {_shown(new)}")
    if pipeline.description != spec.description:
        changes.append("description changed")
    if compared_json(pipeline.match_attributes) != compared_json(spec.match_attributes):
        changes.append(
            f"match.attributes {_shown(pipeline.match_attributes)} -> "
            f"{_shown(spec.match_attributes)}"
        )
    for percentile in PERCENTILES:
        old, new = getattr(pipeline, f"budget_{percentile}_ms"), spec.budget.get(percentile)
        if old != new:
            changes.append(f"budget {percentile} {_shown(old)} -> {_shown(new)}")
    old_objective = _objective(pipeline.objective_target, pipeline.objective_threshold_ms)
    new_objective = _objective(spec.objective_target, spec.objective_threshold_ms)
    if old_objective != new_objective:
        changes.append(f"objective {old_objective} -> {new_objective}")
    for setting in EVALUATION_SETTINGS:
        old, new = getattr(pipeline, setting.field), spec.evaluation[setting.field]
        if old != new:
            changes.append(f"evaluation.{setting.key} {old} -> {new}")
    return changes


def _stage_budget(percentile: str | None, ms: int | None) -> str:
    return f"{percentile} {ms}" if ms is not None else "(none)"


def _stage_differences(stage: Stage, spec: StageSpec) -> list[str]:
    changes = []
    if stage.name != spec.name:
        changes.append(f"name {_shown(stage.name)} -> {_shown(spec.name)}")
    old = (stage.budget_percentile, stage.budget_ms) if stage.budget_ms is not None else None
    new = (spec.budget_percentile, spec.budget_ms) if spec.budget_ms is not None else None
    if old != new:
        if old and new and old[0] == new[0]:
            changes.append(f"budget {old[0]} {old[1]} -> {new[1]}")
        else:
            changes.append(
                f"budget {_stage_budget(*old) if old else '(none)'} -> "
                f"{_stage_budget(*new) if new else '(none)'}"
            )
    if stage.degrade != spec.degrade:
        changes.append(
            f"degrade {degrade_policy_text(stage.degrade)} -> {degrade_policy_text(spec.degrade)}"
        )
    if (stage.stream_budget or {}) != spec.stream_budget:
        changes.append(
            f"stream budget {stream_budget_text(stage.stream_budget)} -> "
            f"{stream_budget_text(spec.stream_budget)}"
        )
    return changes


def _stage_create(pipeline: Pipeline, spec: StageSpec) -> None:
    stage = stage_create(
        pipeline=pipeline,
        slug=spec.slug,
        name=spec.name,
        budget_percentile=spec.budget_percentile or "p95",
        budget_ms=spec.budget_ms,
        degrade=spec.degrade,
        stream_budget=spec.stream_budget,
    )
    rules_sync(stage, spec.rules)


def _creating_stage(pipeline: Pipeline, spec: StageSpec) -> Callable[[Team], None]:
    return lambda team: _stage_create(pipeline, spec)


# The services renumber stages through ``pipeline.stages.all()``, which would answer from
# the planner's prefetch cache; the steps that renumber therefore work on fresh rows.


def _deleting_stage(stage: Stage) -> Callable[[Team], None]:
    return lambda team: stage_delete(
        stage=Stage.objects.select_related("pipeline").get(pk=stage.pk)
    )


def _deleting_pipeline(pipeline: Pipeline) -> Callable[[Team], None]:
    return lambda team: pipeline_delete(pipeline=pipeline)


def _create_pipeline(spec: PipelineSpec) -> Step:
    def run(team: Team) -> None:
        pipeline = pipeline_create(
            team=team, slug=spec.slug, budget=dict(spec.budget), **_pipeline_fields(spec)
        )
        for stage in spec.stages:
            _stage_create(pipeline, stage)
        no_stage_sync(pipeline, spec.no_stage)

    lines = [f"+ pipeline {spec.slug}"] + [f"+ stage {spec.slug}/{s.slug}" for s in spec.stages]
    if spec.no_stage:
        described = "; ".join(NoStageRule(**rule.conditions()).describe() for rule in spec.no_stage)
        lines.append(f"+ no_stage {spec.slug}: {described}")
    return Step(lines, run, spec.line)


def _update_stage(pipeline: Pipeline, stage: Stage, spec: StageSpec) -> Plan:
    plan = Plan()
    path = f"{pipeline.slug}/{stage.slug}"
    differences = _stage_differences(stage, spec)
    if differences:

        def run(team: Team) -> None:
            # A stage deleted earlier in the plan renumbers its siblings; keep that position.
            stage.refresh_from_db(fields=["position"])
            stage_update(
                stage=stage,
                name=spec.name,
                budget_percentile=spec.budget_percentile or stage.budget_percentile,
                budget_ms=spec.budget_ms,
                degrade=spec.degrade,
                stream_budget=spec.stream_budget,
            )

        plan.add(Step([f"~ stage {path}: {change}" for change in differences], run, spec.line))
    old_rules = [rule_fields(rule) for rule in stage.rules.all()]
    new_rules = [rule.fields() for rule in spec.rules]
    if [rule_key(r) for r in old_rules] != [rule_key(r) for r in new_rules]:
        plan.add(
            Step(
                [f"~ rules {path}: {rules_diff(old_rules, new_rules)}"],
                lambda team: rules_sync(stage, spec.rules),
                spec.rules[0].line if spec.rules else spec.line,
            )
        )
    return plan


def _order_step(pipeline: Pipeline, current: list[Stage], specs: list[StageSpec]) -> Step | None:
    wanted = [spec.slug for spec in specs]
    current_slugs = [stage.slug for stage in current]
    kept_before = [slug for slug in current_slugs if slug in wanted]
    kept_after = [slug for slug in wanted if slug in current_slugs]
    # New stages are appended; only renumber when that does not already give the wanted order.
    appended = kept_before + [slug for slug in wanted if slug not in current_slugs]
    if appended == wanted:
        return None

    def run(team: Team) -> None:
        fresh = Pipeline.objects.get(pk=pipeline.pk)
        ids = dict(fresh.stages.values_list("slug", "id"))
        stages_reorder(pipeline=fresh, ordered_ids=[ids[slug] for slug in wanted])

    lines = []
    if kept_before != kept_after:
        lines.append(
            f"~ stages {pipeline.slug}: order {', '.join(kept_before)} -> {', '.join(kept_after)}"
        )
    return Step(lines, run, specs[0].line if specs else None)


def _update_pipeline(pipeline: Pipeline, spec: PipelineSpec) -> Plan:
    plan = Plan()
    differences = _pipeline_differences(pipeline, spec)
    if differences:
        plan.add(
            Step(
                [f"~ pipeline {pipeline.slug}: {change}" for change in differences],
                lambda team: pipeline_update(
                    pipeline=pipeline, budget=dict(spec.budget), **_pipeline_fields(spec)
                ),
                spec.line,
            )
        )
    current = list(pipeline.stages.all())
    by_slug = {stage.slug: stage for stage in current}
    wanted = {stage.slug for stage in spec.stages}
    no_stage = no_stage_step(pipeline, spec)
    # Fewer no-stage rules first, more last: a pipeline at its rule cap can trade stage
    # rules for no-stage rules and back.
    shrinks = len(spec.no_stage) < len(pipeline.no_stage_rules.all())
    if no_stage is not None and shrinks:
        plan.add(no_stage)
    for stage in current:
        if stage.slug not in wanted:
            plan.add(
                Step(
                    [f"- stage {pipeline.slug}/{stage.slug}"],
                    _deleting_stage(stage),
                    spec.line,
                )
            )
    for stage_spec in spec.stages:
        existing = by_slug.get(stage_spec.slug)
        if existing is None:
            plan.add(
                Step(
                    [f"+ stage {pipeline.slug}/{stage_spec.slug}"],
                    _creating_stage(pipeline, stage_spec),
                    stage_spec.line,
                )
            )
        else:
            plan.extend(_update_stage(pipeline, existing, stage_spec))
    order = _order_step(pipeline, current, spec.stages)
    if order is not None:
        plan.add(order)
    if no_stage is not None and not shrinks:
        plan.add(no_stage)
    return plan


def plan_pipelines(team: Team | None, spec: PipelinesSpec, options: PlanOptions) -> Plan:
    current = {p.slug: p for p in pipelines_for_config(team=team)} if team else {}
    plan = Plan()
    for pipeline_spec in spec.pipelines:
        existing = current.get(pipeline_spec.slug)
        if existing is None:
            plan.add(_create_pipeline(pipeline_spec))
        else:
            plan.extend(_update_pipeline(existing, pipeline_spec))
    listed = {p.slug for p in spec.pipelines}
    for slug, pipeline in current.items():
        if slug in listed:
            continue
        if options.prune:
            plan.add(
                Step(
                    [f"- pipeline {slug}"],
                    _deleting_pipeline(pipeline),
                )
            )
        else:
            plan.notes.append(
                f"= pipeline {slug}: not in the file, left alone (--prune deletes it)"
            )
    return plan
