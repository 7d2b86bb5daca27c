"""Creating a pipeline from a preset, all or nothing."""

import copy
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from apps.pipelines.models import Pipeline
from apps.pipelines.presets.catalog import PRESETS
from apps.pipelines.presets.plan import preset_plan
from apps.pipelines.services import pipeline_create, span_rule_create, stage_create
from apps.teams.models import Team


def preset_clean(key: str) -> str:
    if key not in PRESETS:
        choices = ", ".join(PRESETS)
        raise ValidationError({"preset": [f"No preset “{key[:50]}”; choose one of {choices}."]})
    return key


@transaction.atomic
def pipeline_create_from_preset(
    *, team: Team, preset: str, slug: str, name: str, budget: dict[str, int], **fields: Any
) -> Pipeline:
    """A new pipeline with the preset's stages and span rules, each stage budgeted its
    share of ``budget`` (see ``preset_plan``): what the creation form showed."""
    plan = preset_plan(key=preset_clean(preset), budget=budget)
    pipeline = pipeline_create(team=team, slug=slug, name=name, budget=budget, **fields)
    for planned in plan.stages:
        stage = stage_create(
            pipeline=pipeline,
            slug=planned.slug,
            name=planned.name,
            budget_ms=planned.budget_ms,
            budget_percentile=planned.percentile,
        )
        for rule in planned.rules:
            span_rule_create(stage=stage, **copy.deepcopy(dict(rule)))
    return pipeline
