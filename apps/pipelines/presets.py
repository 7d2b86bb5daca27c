"""Starting points for new pipelines, matched through OpenTelemetry GenAI and OpenInference.

Stage order matters: rules are tried stage by stage and the first match wins, so
specific stages (query rewrite, planning) come before the catch-all LLM stages.
"""

import copy
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from apps.pipelines.models import Pipeline, Portion
from apps.pipelines.services import pipeline_create, span_rule_create, stage_create
from apps.teams.models import Team

OP = "gen_ai.operation.name"
KIND = "openinference.span.kind"


@dataclass(frozen=True)
class PresetStage:
    slug: str
    name: str
    budget_ms: int
    rules: list[dict[str, Any]] = field(default_factory=list)
    budget_percentile: str = "p95"


@dataclass(frozen=True)
class Preset:
    title: str
    description: str = ""
    budget: dict[str, int] = field(default_factory=dict)
    stages: list[PresetStage] = field(default_factory=list)


def _llm_rules(portion: str) -> list[dict[str, Any]]:
    return [
        {"attributes": {OP: "chat"}, "portion": portion},
        {"attributes": {KIND: "LLM"}, "portion": portion},
    ]


RETRIEVAL = PresetStage(
    "retrieval",
    "Retrieval",
    300,
    [
        {"attributes": {KIND: "RETRIEVER"}},
        {"attributes": {OP: "retrieval"}},
        {"span_name": "vector.search*"},
    ],
)
TTFT = PresetStage("ttft", "Time to first token", 800, _llm_rules(Portion.UNTIL_FIRST_TOKEN))
GENERATION = PresetStage("generation", "Generation", 2000, _llm_rules(Portion.AFTER_FIRST_TOKEN))

PRESETS: dict[str, Preset] = {
    "blank": Preset("Blank"),
    "rag-chat": Preset(
        "RAG chat",
        "Retrieval-augmented chat answer: rewrite, embed, retrieve, rerank, then stream.",
        {"p95": 4000},
        [
            PresetStage("auth", "Auth", 50, [{"span_name": "auth*"}]),
            PresetStage("query-rewrite", "Query rewrite", 400, [{"span_name": "*rewrite*"}]),
            PresetStage(
                "embedding",
                "Embedding",
                150,
                [{"attributes": {OP: "embeddings"}}, {"attributes": {KIND: "EMBEDDING"}}],
            ),
            RETRIEVAL,
            PresetStage("rerank", "Rerank", 200, [{"attributes": {KIND: "RERANKER"}}]),
            TTFT,
            GENERATION,
        ],
    ),
    "agent-tools": Preset(
        "Agent with tools",
        "Agent turn: plan, call tools, retrieve, answer, check the answer.",
        {"p95": 8000},
        [
            PresetStage(
                "plan",
                "Plan",
                1200,
                [
                    {"span_name": "*plan*", "attributes": {KIND: "LLM"}},
                    {"attributes": {OP: "invoke_agent"}},
                    {"attributes": {KIND: "AGENT"}},
                ],
            ),
            PresetStage(
                "tool-calls",
                "Tool calls",
                2500,
                [{"attributes": {OP: "execute_tool"}}, {"attributes": {KIND: "TOOL"}}],
            ),
            PresetStage("retrieval", "Retrieval", 400, RETRIEVAL.rules),
            PresetStage("ttft", "Time to first token", 900, TTFT.rules),
            PresetStage("generation", "Generation", 2500, GENERATION.rules),
            PresetStage("guardrail", "Guardrail", 300, [{"attributes": {KIND: "GUARDRAIL"}}]),
        ],
    ),
}


@transaction.atomic
def pipeline_create_from_preset(
    *, team: Team, preset: str, slug: str, name: str, budget: dict[str, int], **fields: Any
) -> Pipeline:
    """Create a pipeline with the preset's stages and span rules, all or nothing."""
    pipeline = pipeline_create(team=team, slug=slug, name=name, budget=budget, **fields)
    for stage_preset in PRESETS[preset].stages:
        stage = stage_create(
            pipeline=pipeline,
            slug=stage_preset.slug,
            name=stage_preset.name,
            budget_ms=stage_preset.budget_ms,
            budget_percentile=stage_preset.budget_percentile,
        )
        for rule in stage_preset.rules:
            span_rule_create(stage=stage, **copy.deepcopy(rule))
    return pipeline
