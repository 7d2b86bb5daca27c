import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from apps.core.percentiles import PERCENTILES
from apps.pipelines.attribute_json import AttributeJSONEncoder
from apps.pipelines.degrade_policy import degrade_policy_clean
from apps.pipelines.models import NoStageRule, Pipeline, Portion, SpanConditions, SpanRule, Stage
from apps.pipelines.stream_budget import stream_budget_clean
from apps.pipelines.validation import (
    EVALUATION_SETTINGS,
    validate_attributes,
    validate_attributes_storable,
    validate_glob,
    validate_span_name,
)
from apps.teams.accounts import account_cap_error, account_lock, account_teams
from apps.teams.models import Team

PIPELINE_FIELDS = (
    "name",
    "slug",
    "description",
    "match_service",
    "match_root_span",
    "match_attributes",
    "objective_target",
    "objective_threshold_ms",
    *(setting.field for setting in EVALUATION_SETTINGS),
)
STAGE_FIELDS = ("name", "slug", "budget_percentile", "budget_ms", "degrade", "stream_budget")
# What a span must be for a rule to take it: stage rules and no-stage rules alike.
CONDITION_FIELDS = ("span_name", "name_match", "attributes", "span_kind", "service")
RULE_FIELDS = (*CONDITION_FIELDS, "portion", "first_token_event")
NO_STAGE_RULE_FIELDS = CONDITION_FIELDS
# The pipeline's fields that decide which traces are its own.
ROUTING_FIELDS = ("match_service", "match_root_span", "match_attributes")


def _rules_changed(pipeline_id: int) -> None:
    """Record that the pipeline's traces would now be analysed differently: its figures
    computed before now used the earlier rules (its pages say so until recomputed)."""
    Pipeline.objects.filter(pk=pipeline_id).update(rules_changed_at=timezone.now())


def _compared(instance: Pipeline | Stage | SpanRule | NoStageRule, fields: tuple[str, ...]) -> str:
    # As text: 1, 1.0 and true compare equal in Python but are different rule values.
    values = {field: getattr(instance, field) for field in fields}
    return json.dumps(values, sort_keys=True, cls=AttributeJSONEncoder, default=str)


def _pipeline_validate(pipeline: Pipeline) -> None:
    errors: dict[str, list[str]] = {}
    try:
        validate_attributes(pipeline.match_attributes)
        validate_attributes_storable(pipeline.match_attributes)
    except ValidationError as exc:
        errors.setdefault("match_attributes", []).extend(exc.messages)
    try:
        validate_glob(pipeline.match_root_span)
    except ValidationError as exc:
        errors.setdefault("match_root_span", []).extend(exc.messages)
    if not pipeline.budget:
        errors.setdefault("budget", []).append(
            "Set an end-to-end budget at one or more of p50/p90/p95/p99."
        )
    if (pipeline.objective_target is None) != (pipeline.objective_threshold_ms is None):
        errors.setdefault("objective_target", []).append(
            "An objective needs both a target percentage and a threshold."
        )
    if (
        Pipeline.objects.filter(team_id=pipeline.team_id, slug=pipeline.slug)
        .exclude(pk=pipeline.pk)
        .exists()
    ):
        errors.setdefault("slug", []).append("This team already has a pipeline with this slug.")
    not_whole = [
        setting.field
        for setting in EVALUATION_SETTINGS
        # full_clean would quietly turn True into 1 and 300.7 into 300.
        if type(getattr(pipeline, setting.field)) is not int
    ]
    for field in not_whole:
        errors.setdefault(field, []).append("Enter a whole number.")
    try:
        pipeline.full_clean(exclude=not_whole, validate_unique=False, validate_constraints=False)
    except ValidationError as exc:
        for field, messages in exc.message_dict.items():
            errors.setdefault(field, []).extend(messages)
    if errors:
        raise ValidationError(errors)


def _apply_budget(pipeline: Pipeline, budget: dict[str, int] | None) -> None:
    if budget is None:
        return
    for percentile in PERCENTILES:
        setattr(pipeline, f"budget_{percentile}_ms", budget.get(percentile))


def _normalise_objective(fields: dict[str, Any]) -> None:
    if fields.get("objective_target") is not None:
        fields["objective_target"] = Decimal(str(fields["objective_target"]))


@transaction.atomic
def pipeline_create(
    *, team: Team, slug: str, name: str, budget: dict[str, int], **fields: Any
) -> Pipeline:
    """A new pipeline of ``team``; its account holds at most ``ACCOUNT_MAX_PIPELINES``
    over all its teams (each pipeline costs every trace's routing and every evaluation)."""
    unknown = set(fields) - set(PIPELINE_FIELDS)
    if unknown:
        raise TypeError(f"Unknown pipeline fields: {sorted(unknown)}")
    _normalise_objective(fields)
    pipeline = Pipeline(team=team, slug=slug, name=name, **fields)
    _apply_budget(pipeline, budget)
    _pipeline_validate(pipeline)
    _pipeline_cap_check(team)
    pipeline.save()
    return pipeline


def _pipeline_cap_check(team: Team) -> None:
    cap = settings.ACCOUNT_MAX_PIPELINES
    if not cap:
        return
    account_lock(team=team)
    used = Pipeline.objects.filter(team__in=account_teams(team=team)).count()
    if used >= cap:
        raise account_cap_error(
            what="pipelines",
            used=used,
            cap=cap,
            setting="ACCOUNT_MAX_PIPELINES",
            code="too_many_pipelines",
        )


def pipeline_update(
    *, pipeline: Pipeline, budget: dict[str, int] | None = None, **fields: Any
) -> Pipeline:
    unknown = set(fields) - set(PIPELINE_FIELDS)
    if unknown:
        raise TypeError(f"Unknown pipeline fields: {sorted(unknown)}")
    _normalise_objective(fields)
    routing = _compared(pipeline, ROUTING_FIELDS)
    for field, value in fields.items():
        setattr(pipeline, field, value)
    _apply_budget(pipeline, budget)
    _pipeline_validate(pipeline)
    # Every field but the time of the last rule change, which this copy may hold from
    # before a change made since it was read.
    pipeline.save(update_fields=_UPDATED_FIELDS)
    if _compared(pipeline, ROUTING_FIELDS) != routing:
        _rules_changed(pipeline.pk)
    return pipeline


_UPDATED_FIELDS = [
    field.name
    for field in Pipeline._meta.concrete_fields
    if not field.primary_key and field.name not in ("rules_changed_at", "created_at")
]


def pipeline_delete(*, pipeline: Pipeline) -> None:
    pipeline.delete()


def _degrade(value: Any) -> dict[str, Any]:
    """The policy as stored, or the error under the field's name."""
    try:
        return degrade_policy_clean(value)
    except ValidationError as exc:
        raise ValidationError({"degrade": exc.messages}) from exc


def _stream_budget(value: Any) -> dict[str, Any]:
    """The budgets as stored, or the error under the field's name."""
    try:
        return stream_budget_clean(value)
    except ValidationError as exc:
        raise ValidationError({"stream_budget": exc.messages}) from exc


def _stage_validate(stage: Stage) -> None:
    errors: dict[str, list[str]] = {}
    if (
        Stage.objects.filter(pipeline_id=stage.pipeline_id, slug=stage.slug)
        .exclude(pk=stage.pk)
        .exists()
    ):
        errors["slug"] = ["This pipeline already has a stage with this slug."]
    try:
        stage.full_clean(validate_unique=False, validate_constraints=False)
    except ValidationError as exc:
        for field, messages in exc.message_dict.items():
            errors.setdefault(field, []).extend(messages)
    if errors:
        raise ValidationError(errors)


def stage_create(
    *,
    pipeline: Pipeline,
    slug: str,
    name: str,
    budget_percentile: str = "p95",
    budget_ms: int | None = None,
    position: int | None = None,
    degrade: dict[str, Any] | None = None,
    stream_budget: dict[str, Any] | None = None,
) -> Stage:
    if position is None:
        last = pipeline.stages.aggregate(last=Max("position"))["last"]
        position = 0 if last is None else last + 1
    stage = Stage(
        pipeline=pipeline,
        slug=slug,
        name=name,
        budget_percentile=budget_percentile,
        budget_ms=budget_ms,
        position=position,
        degrade=_degrade(degrade),
        stream_budget=_stream_budget(stream_budget),
    )
    _stage_validate(stage)
    stage.save()
    return stage


def stage_update(*, stage: Stage, **fields: Any) -> Stage:
    unknown = set(fields) - set(STAGE_FIELDS) - {"position"}
    if unknown:
        raise TypeError(f"Unknown stage fields: {sorted(unknown)}")
    moved = "position" in fields and fields["position"] != stage.position
    if "degrade" in fields:
        fields["degrade"] = _degrade(fields["degrade"])
    if "stream_budget" in fields:
        fields["stream_budget"] = _stream_budget(fields["stream_budget"])
    for field, value in fields.items():
        setattr(stage, field, value)
    _stage_validate(stage)
    stage.save()
    if moved:  # rules are tried in stage order
        _rules_changed(stage.pipeline_id)
    return stage


@transaction.atomic
def stage_delete(*, stage: Stage) -> None:
    pipeline = stage.pipeline
    if stage.rules.exists():  # its spans now go to later stages' rules, or to none
        _rules_changed(pipeline.pk)
    stage.delete()
    _stages_renumber(
        pipeline=pipeline, ordered_ids=list(pipeline.stages.values_list("id", flat=True))
    )


def _stages_renumber(*, pipeline: Pipeline, ordered_ids: list[int]) -> None:
    # A fresh query: a prefetched pipeline.stages cache may predate the last change.
    stages = {stage.id: stage for stage in Stage.objects.filter(pipeline=pipeline)}
    for position, stage_id in enumerate(ordered_ids):
        stage = stages[stage_id]
        if stage.position != position:
            stage.position = position
            stage.save(update_fields=["position", "updated_at"])


@transaction.atomic
def stages_reorder(*, pipeline: Pipeline, ordered_ids: list[int]) -> list[Stage]:
    """Give the pipeline's stages the order of ``ordered_ids``, which must name each once."""
    stages = Stage.objects.filter(pipeline=pipeline).order_by("position", "id")
    current = list(stages.values_list("id", flat=True))
    if len(ordered_ids) != len(set(ordered_ids)) or set(ordered_ids) != set(current):
        raise ValidationError("The new order must list every stage of the pipeline exactly once.")
    _stages_renumber(pipeline=pipeline, ordered_ids=ordered_ids)
    if list(ordered_ids) != current:  # rules are tried in stage order
        _rules_changed(pipeline.pk)
    return list(pipeline.stages.order_by("position"))


@transaction.atomic
def stage_move(*, stage: Stage, offset: int) -> list[Stage]:
    """Move a stage up (-1) or down (+1) by swapping it with its neighbour."""
    ids = list(stage.pipeline.stages.order_by("position", "id").values_list("id", flat=True))
    index = ids.index(stage.id)
    target = max(0, min(len(ids) - 1, index + offset))
    ids.insert(target, ids.pop(index))
    return stages_reorder(pipeline=stage.pipeline, ordered_ids=ids)


def _conditions_errors(rule: SpanConditions) -> dict[str, list[str]]:
    """What is wrong with a rule's conditions, by field: one check for every kind of rule."""
    errors: dict[str, list[str]] = {}
    try:
        validate_attributes(rule.attributes)
        validate_attributes_storable(rule.attributes)
    except ValidationError as exc:
        errors["attributes"] = exc.messages
    try:
        validate_span_name(rule.span_name, rule.name_match)
    except ValidationError as exc:
        errors["span_name"] = exc.messages
    if not (rule.span_name or rule.attributes or rule.span_kind or rule.service):
        errors.setdefault("span_name", []).append(
            "A rule needs at least one condition: span name, attribute, span kind or service."
        )
    return errors


def span_conditions_validate(**fields: Any) -> None:
    """Raise what a rule with these conditions would get on save, before there is one to
    save (the rule tester tries a rule as it is typed)."""
    _unknown(fields, CONDITION_FIELDS, "rule condition")
    errors = _conditions_errors(NoStageRule(**fields))
    if errors:
        raise ValidationError(errors)


def _rule_validate(rule: SpanConditions) -> None:
    errors = _conditions_errors(rule)
    if (
        isinstance(rule, SpanRule)
        and rule.portion != Portion.WHOLE
        and not rule.first_token_event.strip()
    ):
        errors["first_token_event"] = ["Name the event that marks the first token."]
    try:
        rule.full_clean(validate_unique=False, validate_constraints=False)
    except ValidationError as exc:
        for field, messages in exc.message_dict.items():
            errors.setdefault(field, []).extend(messages)
    if errors:
        raise ValidationError(errors)


def pipeline_rule_count(*, pipeline_id: int) -> int:
    """Rules of a pipeline, of its stages and its no-stage rules: each is tried on every
    span of its traces."""
    return (
        SpanRule.objects.filter(stage__pipeline_id=pipeline_id).count()
        + NoStageRule.objects.filter(pipeline_id=pipeline_id).count()
    )


def _rule_cap_check(pipeline_id: int) -> None:
    """A pipeline holds at most ``PIPELINE_MAX_RULES`` rules, stage and no-stage rules
    together. Call inside ``transaction.atomic``: the pipeline row is locked, so two
    requests cannot both take the last place."""
    cap = settings.PIPELINE_MAX_RULES
    if not cap:
        return
    list(Pipeline.objects.select_for_update().filter(pk=pipeline_id).values_list("pk"))
    used = pipeline_rule_count(pipeline_id=pipeline_id)
    if used >= cap:
        raise ValidationError(
            f"This pipeline already has {used} span rules (its stages' and its no-stage "
            f"rules together), the most a pipeline may have (PIPELINE_MAX_RULES={cap}). "
            "Remove one first, or make one rule cover more spans.",
            code="too_many_rules",
        )


def _unknown(fields: dict[str, Any], allowed: tuple[str, ...], what: str) -> None:
    unknown = set(fields) - set(allowed)
    if unknown:
        raise TypeError(f"Unknown {what} fields: {sorted(unknown)}")


@transaction.atomic
def span_rule_create(*, stage: Stage, position: int | None = None, **fields: Any) -> SpanRule:
    _unknown(fields, RULE_FIELDS, "span rule")
    if position is None:
        last = stage.rules.aggregate(last=Max("position"))["last"]
        position = 0 if last is None else last + 1
    rule = SpanRule(stage=stage, position=position, **fields)
    _rule_validate(rule)
    _rule_cap_check(stage.pipeline_id)
    rule.save()
    _rules_changed(stage.pipeline_id)
    return rule


def span_rule_update(*, rule: SpanRule, **fields: Any) -> SpanRule:
    _unknown(fields, (*RULE_FIELDS, "position"), "span rule")
    compared = (*RULE_FIELDS, "position")
    before = _compared(rule, compared)
    for field, value in fields.items():
        setattr(rule, field, value)
    _rule_validate(rule)
    rule.save()
    if _compared(rule, compared) != before:
        _rules_changed(rule.stage.pipeline_id)
    return rule


def span_rule_delete(*, rule: SpanRule) -> None:
    pipeline_id = rule.stage.pipeline_id
    rule.delete()
    _rules_changed(pipeline_id)


@transaction.atomic
def no_stage_rule_create(
    *, pipeline: Pipeline, position: int | None = None, **fields: Any
) -> NoStageRule:
    """A rule whose spans belong to no stage on purpose, with what they hold that no rule
    takes; the same conditions, checks and cap as a stage's span rule."""
    _unknown(fields, NO_STAGE_RULE_FIELDS, "no-stage rule")
    if position is None:
        last = pipeline.no_stage_rules.aggregate(last=Max("position"))["last"]
        position = 0 if last is None else last + 1
    rule = NoStageRule(pipeline=pipeline, position=position, **fields)
    _rule_validate(rule)
    _rule_cap_check(pipeline.pk)
    rule.save()
    _rules_changed(rule.pipeline_id)
    return rule


def no_stage_rule_update(*, rule: NoStageRule, **fields: Any) -> NoStageRule:
    _unknown(fields, (*NO_STAGE_RULE_FIELDS, "position"), "no-stage rule")
    for field, value in fields.items():
        setattr(rule, field, value)
    _rule_validate(rule)
    rule.save()
    _rules_changed(rule.pipeline_id)
    return rule


def no_stage_rule_delete(*, rule: NoStageRule) -> None:
    pipeline_id = rule.pipeline_id
    rule.delete()
    _rules_changed(pipeline_id)


@transaction.atomic
def stage_budgets_set(*, pipeline: Pipeline, budgets_ms: Mapping[int, int]) -> list[Stage]:
    """Set the budgets of some of a pipeline's stages at once (the fit check's "apply"),
    each through ``stage_update`` as the editor does; all or nothing."""
    stages = Stage.objects.select_for_update().filter(pipeline=pipeline, pk__in=list(budgets_ms))
    by_id = {stage.pk: stage for stage in stages}
    missing = set(budgets_ms) - set(by_id)
    if missing:
        raise ValidationError({"stage": [f"No such stage in this pipeline: {sorted(missing)}."]})
    return [stage_update(stage=by_id[pk], budget_ms=value) for pk, value in budgets_ms.items()]


@transaction.atomic
def pipeline_budgets_set(
    *, pipeline: Pipeline, stage_budgets_ms: Mapping[int, int], e2e_ms: Mapping[str, int]
) -> list[Stage]:
    """Set end-to-end budgets (by percentile, the others kept) and stage budgets at once,
    as the fit check's "Apply" offers them; all or nothing."""
    unknown = sorted(set(e2e_ms) - set(PERCENTILES))
    if unknown:
        raise ValidationError({"budget": [f"No such percentile: {', '.join(unknown)[:50]}."]})
    if e2e_ms:
        pipeline_update(pipeline=pipeline, budget={**pipeline.budget, **e2e_ms})
    return stage_budgets_set(pipeline=pipeline, budgets_ms=stage_budgets_ms)


# A fleet reads a runtime document many times a minute: the time is written once per this.
RUNTIME_READ_MARK_S = 300


def pipeline_runtime_read(*, pipeline: Pipeline) -> None:
    """Note that a run-time client read the pipeline's runtime document (its lever advice
    is then kept fresh); one write per ``RUNTIME_READ_MARK_S`` per pipeline at most."""
    if cache.add(f"runtime:read:{pipeline.pk}", 1, timeout=RUNTIME_READ_MARK_S):
        Pipeline.objects.filter(pk=pipeline.pk).update(runtime_read_at=timezone.now())
