"""Presets: stages and budgets scaled to the end-to-end budget, created all or nothing."""

import math
from fractions import Fraction

import pytest
from django.core.exceptions import ValidationError

from apps.pipelines.budget_rounding import budget_round_down, budget_round_up, budget_step
from apps.pipelines.config_as_code import config_export, config_preview
from apps.pipelines.models import Pipeline, SpanRule, Stage
from apps.pipelines.presets import PRESETS, pipeline_create_from_preset, preset_plan
from apps.pipelines.presets import services as preset_services
from tests.builders.configuration import make_pipeline
from tests.conftest import TeamWorld

pytestmark = pytest.mark.django_db
WITH_STAGES = [key for key, preset in PRESETS.items() if preset.stages]


def create(world: TeamWorld, preset: str, slug: str = "p", p95: int = 5000) -> Pipeline:
    return pipeline_create_from_preset(
        team=world.team, preset=preset, slug=slug, name=slug, budget={"p95": p95}
    )


def budgets(pipeline: Pipeline) -> list[tuple[str, int | None, str]]:
    stages = pipeline.stages.order_by("position")
    return [(s.slug, s.budget_ms, s.budget_percentile) for s in stages]


def rules_of(pipeline: Pipeline, slug: str) -> list[tuple[str, dict, str]]:
    stage = pipeline.stages.get(slug=slug)
    return [(r.span_name, r.attributes, r.portion) for r in stage.rules.order_by("position")]


def test_blank_preset_creates_a_pipeline_without_stages(world: TeamWorld) -> None:
    pipeline = create(world, "blank")
    assert pipeline.budget == {"p95": 5000}
    assert pipeline.stages.count() == 0


@pytest.mark.parametrize(
    ("p95", "expected"),
    [
        # 5, 10, 5, 20 and 45 % of the budget; steps of 5 ms under 200, 10 under 2000, 50 up.
        (2000, [100, 200, 100, 400, 900]),
        (2500, [125, 250, 125, 500, 1120]),  # 1125 rounds down to 1120
        (4000, [200, 400, 200, 800, 1800]),
        (9999, [490, 990, 490, 1990, 4450]),  # 499.95, 999.9, 1999.8, 4499.55
        (150, [7, 15, 7, 30, 65]),  # 7.5 -> 7 (1 ms steps under 20), 67.5 -> 65
    ],
)
def test_rag_chat_stage_budgets_are_shares_of_the_budget_typed(
    world: TeamWorld, p95: int, expected: list[int]
) -> None:
    pipeline = create(world, "rag-chat", p95=p95)
    assert budgets(pipeline) == [
        (slug, ms, "p95")
        for slug, ms in zip(
            ["embedding", "retrieval", "rerank", "ttft", "generation"], expected, strict=True
        )
    ]
    assert sum(expected) <= p95


def test_stage_budgets_go_to_the_headline_percentile(world: TeamWorld) -> None:
    pipeline = pipeline_create_from_preset(
        team=world.team,
        preset="streaming-chat",
        slug="chat",
        name="Chat",
        budget={"p50": 900, "p99": 6000},
    )
    # The allocation bar compares with the highest percentile given: 25 % and 65 % of it.
    assert budgets(pipeline) == [("ttft", 1500, "p99"), ("generation", 3900, "p99")]


@pytest.mark.parametrize("key", WITH_STAGES)
@pytest.mark.parametrize("e2e", [1, 2, 3, 7, 19, 20, 21, 99, 199, 200, 1999, 2000, 2001, 3_600_000])
def test_stage_budgets_never_add_up_past_the_end_to_end_budget(key: str, e2e: int) -> None:
    plan = preset_plan(key=key, budget={"p90": e2e})
    assert plan.allocated_ms <= e2e
    for stage in plan.stages:
        exact = Fraction(e2e * stage.share_percent, 100)
        # The exact share rounded down to its step; a share under 1 ms gets no budget.
        expected = math.floor(exact / budget_step(exact)) * budget_step(exact)
        assert stage.budget_ms == (expected or None)
        assert stage.percentile == "p90"


@pytest.mark.parametrize("key", WITH_STAGES)
def test_each_preset_leaves_room_for_orchestration_and_names_stages_once(key: str) -> None:
    preset = PRESETS[key]
    assert preset.share_percent <= 90
    assert len({stage.slug for stage in preset.stages}) == len(preset.stages)


def test_budgets_are_rounded_to_steps_people_write() -> None:
    assert [budget_round_down(ms) for ms in (0.4, 1, 19.9, 20, 199.9, 1999.9, 2049.9)] == [
        0, 1, 19, 20, 195, 1990, 2000,
    ]  # fmt: skip
    assert [budget_round_up(ms) for ms in (0.4, 19.1, 20.1, 1990.1, 2000.1, 3412)] == [
        1, 20, 25, 2000, 2050, 3450,
    ]  # fmt: skip
    # Observed plus 10 % in floating point is a hair over a step: still that step.
    assert (50 * 1.1, 1300 * 1.1) == (55.00000000000001, 1430.0000000000002)
    assert [budget_round_up(50 * 1.1), budget_round_up(1300 * 1.1)] == [55, 1430]
    assert budget_round_down(0.3 * 3 * 100 / 0.9) == 100  # 99.99999999999999


def test_a_preset_without_an_end_to_end_budget_plans_stages_without_budgets() -> None:
    plan = preset_plan(key="rag-chat", budget={})
    assert (plan.percentile, plan.e2e_ms, plan.allocated_ms, plan.allocated_share) == (
        None, None, 0, None,
    )  # fmt: skip
    assert {stage.budget_ms for stage in plan.stages} == {None}


def test_the_plan_says_each_rule_once_grouped_by_what_it_compares() -> None:
    plan = preset_plan(key="rag-chat", budget={"p95": 2000})
    retrieval = next(stage for stage in plan.stages if stage.slug == "retrieval")
    groups = {group.label: group.values for group in retrieval.groups}
    assert groups["openinference.span.kind"] == ["RETRIEVER"]
    assert {"qdrant", "Qdrant", "pinecone", "Pinecone", "chroma", "chromadb"} <= set(
        groups["db.system"]
    )
    assert "retrieval" in groups["span name"]
    assert sum(len(values) for values in groups.values()) == len(retrieval.rules)
    ttft = next(stage for stage in plan.stages if stage.slug == "ttft")
    assert ttft.portion == "until_first_token"


def test_created_rules_are_what_the_plan_lists(world: TeamWorld) -> None:
    pipeline = create(world, "rag-chat")
    plan = preset_plan(key="rag-chat", budget={"p95": 5000})
    for planned in plan.stages:
        created = rules_of(pipeline, planned.slug)
        listed = [
            (rule.get("span_name", ""), rule.get("attributes", {}), rule.get("portion", "whole"))
            for rule in planned.rules
        ]
        assert created == listed


def test_two_pipelines_from_one_preset_do_not_share_rule_data(world: TeamWorld) -> None:
    first = create(world, "agent-tools", "first")
    second = create(world, "agent-tools", "second")
    rule = SpanRule.objects.filter(stage__pipeline=first, stage__slug="retrieval").first()
    assert rule is not None
    rule.attributes["tampered"] = "yes"
    rule.save()
    assert all("tampered" not in a for _, a, _ in rules_of(second, "retrieval"))
    assert all("tampered" not in a for _, a, _ in rules_of(first, "ttft"))
    assert all("tampered" not in rule.get("attributes", {}) for rule in _all_preset_rules())


def _all_preset_rules() -> list[dict]:
    return [dict(rule) for p in PRESETS.values() for s in p.stages for rule in s.rules]


def test_creating_from_a_preset_is_all_or_nothing(
    world: TeamWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_rule_create = preset_services.span_rule_create
    calls = []

    def failing_rule_create(**kwargs: object) -> SpanRule:
        calls.append(kwargs)
        if len(calls) == 4:
            raise ValidationError({"span_name": ["boom"]})
        return real_rule_create(**kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(preset_services, "span_rule_create", failing_rule_create)
    with pytest.raises(ValidationError):
        create(world, "rag-chat")
    assert not Pipeline.objects.filter(team=world.team).exists()
    assert not Stage.objects.exists()
    assert not SpanRule.objects.exists()


def test_a_taken_slug_stops_a_preset_before_anything_is_written(world: TeamWorld) -> None:
    make_pipeline(world.team, "p")
    with pytest.raises(ValidationError):
        create(world, "rag-chat")
    assert Stage.objects.count() == 0


def test_an_unknown_preset_is_refused_by_name(world: TeamWorld) -> None:
    with pytest.raises(ValidationError) as refused:
        create(world, "x" * 500)
    assert "preset" in refused.value.message_dict
    assert not Pipeline.objects.exists()


@pytest.mark.parametrize("key", WITH_STAGES)
def test_a_preset_pipeline_exports_to_yaml_that_applies_without_a_change(
    world: TeamWorld, key: str
) -> None:
    pipeline = create(world, key, p95=2500)
    text = config_export(team=world.team, masked=False)
    assert "db.system" in text or key == "streaming-chat"

    assert config_preview(team=world.team, text=text, prune=True).changes == []
    pipeline.delete()
    created = config_preview(team=world.team, text=text, prune=True).changes
    assert created[0] == "+ pipeline p"
    assert len(created) == 1 + len(PRESETS[key].stages)
