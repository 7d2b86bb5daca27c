import pytest
from django.core.exceptions import ValidationError

from apps.pipelines import presets
from apps.pipelines.models import Pipeline, SpanRule, Stage
from apps.pipelines.presets import PRESETS, pipeline_create_from_preset
from tests.conftest import TeamWorld
from tests.factories import make_pipeline

pytestmark = pytest.mark.django_db


def create(world: TeamWorld, preset: str, slug: str = "p") -> Pipeline:
    return pipeline_create_from_preset(
        team=world.team, preset=preset, slug=slug, name=slug, budget={"p95": 5000}
    )


def rules_of(pipeline: Pipeline, slug: str) -> list[tuple[str, dict, str]]:
    stage = pipeline.stages.get(slug=slug)
    return [(r.span_name, r.attributes, r.portion) for r in stage.rules.order_by("position")]


def test_blank_preset_creates_a_pipeline_without_stages(world: TeamWorld) -> None:
    pipeline = create(world, "blank")
    assert pipeline.budget == {"p95": 5000}
    assert pipeline.stages.count() == 0


def test_rag_chat_preset_creates_its_stages_in_order_with_budgets(world: TeamWorld) -> None:
    pipeline = create(world, "rag-chat")
    stages = list(pipeline.stages.order_by("position"))
    assert [(s.slug, s.budget_ms, s.budget_percentile, s.position) for s in stages] == [
        ("auth", 50, "p95", 0),
        ("query-rewrite", 400, "p95", 1),
        ("embedding", 150, "p95", 2),
        ("retrieval", 300, "p95", 3),
        ("rerank", 200, "p95", 4),
        ("ttft", 800, "p95", 5),
        ("generation", 2000, "p95", 6),
    ]


def test_rag_chat_preset_matches_genai_and_openinference_spans(world: TeamWorld) -> None:
    pipeline = create(world, "rag-chat")
    assert rules_of(pipeline, "auth") == [("auth*", {}, "whole")]
    assert rules_of(pipeline, "embedding") == [
        ("", {"gen_ai.operation.name": "embeddings"}, "whole"),
        ("", {"openinference.span.kind": "EMBEDDING"}, "whole"),
    ]
    assert rules_of(pipeline, "retrieval") == [
        ("", {"openinference.span.kind": "RETRIEVER"}, "whole"),
        ("", {"gen_ai.operation.name": "retrieval"}, "whole"),
        ("vector.search*", {}, "whole"),
    ]
    assert rules_of(pipeline, "rerank") == [("", {"openinference.span.kind": "RERANKER"}, "whole")]
    assert rules_of(pipeline, "ttft") == [
        ("", {"gen_ai.operation.name": "chat"}, "until_first_token"),
        ("", {"openinference.span.kind": "LLM"}, "until_first_token"),
    ]
    assert rules_of(pipeline, "generation") == [
        ("", {"gen_ai.operation.name": "chat"}, "after_first_token"),
        ("", {"openinference.span.kind": "LLM"}, "after_first_token"),
    ]


def test_agent_preset_creates_plan_tools_retrieval_llm_and_guardrail(world: TeamWorld) -> None:
    pipeline = create(world, "agent-tools")
    assert list(pipeline.stages.order_by("position").values_list("slug", flat=True)) == [
        "plan",
        "tool-calls",
        "retrieval",
        "ttft",
        "generation",
        "guardrail",
    ]
    assert rules_of(pipeline, "tool-calls") == [
        ("", {"gen_ai.operation.name": "execute_tool"}, "whole"),
        ("", {"openinference.span.kind": "TOOL"}, "whole"),
    ]
    assert ("", {"gen_ai.operation.name": "invoke_agent"}, "whole") in rules_of(pipeline, "plan")
    assert rules_of(pipeline, "guardrail") == [
        ("", {"openinference.span.kind": "GUARDRAIL"}, "whole")
    ]
    assert {portion for _, _, portion in rules_of(pipeline, "ttft")} == {"until_first_token"}


def test_two_pipelines_from_one_preset_do_not_share_rule_data(world: TeamWorld) -> None:
    first = create(world, "agent-tools", "first")
    second = create(world, "agent-tools", "second")
    rule = SpanRule.objects.filter(stage__pipeline=first, stage__slug="retrieval").first()
    assert rule is not None
    rule.attributes["tampered"] = "yes"
    rule.save()
    assert all("tampered" not in a for _, a, _ in rules_of(second, "retrieval"))
    assert all("tampered" not in a for _, a, _ in rules_of(first, "ttft"))


@pytest.mark.parametrize("key", [k for k, p in PRESETS.items() if p.stages])
def test_preset_stage_budgets_fit_inside_its_suggested_end_to_end_budget(key: str) -> None:
    preset = PRESETS[key]
    assert sum(stage.budget_ms for stage in preset.stages) <= preset.budget["p95"]
    assert len({stage.slug for stage in preset.stages}) == len(preset.stages)


def test_creating_from_a_preset_is_all_or_nothing(
    world: TeamWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_rule_create = presets.span_rule_create
    calls = []

    def failing_rule_create(**kwargs: object) -> SpanRule:
        calls.append(kwargs)
        if len(calls) == 4:
            raise ValidationError({"span_name": ["boom"]})
        return real_rule_create(**kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(presets, "span_rule_create", failing_rule_create)
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
