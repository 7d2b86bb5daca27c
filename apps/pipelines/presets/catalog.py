"""The presets: stages with a share of the end-to-end budget and the rules that find
their spans in what real instrumentation emits (see ``conventions``).

Stage order matters: rules are tried stage by stage and the first match wins. A
stage's share is of the end-to-end budget at its headline percentile; the shares of
a preset leave room for the orchestration no stage covers, so budgets scaled from
them never add up past the end-to-end budget.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from apps.pipelines.models import Portion
from apps.pipelines.presets.conventions import (
    EMBEDDING_SPAN_NAMES,
    LLM_OPERATIONS,
    LLM_REQUEST_TYPES,
    LLM_SPAN_NAMES,
    OPERATION,
    REDIS_SEARCH_SPAN_NAMES,
    REQUEST_TYPE,
    RERANK_SPAN_NAMES,
    RETRIEVAL_SPAN_NAMES,
    SPAN_KIND,
    VECTOR_STORES,
    Rule,
    by_attribute,
    by_span_name,
    by_store,
)


@dataclass(frozen=True)
class PresetStage:
    slug: str
    name: str
    share_percent: int  # of the end-to-end budget
    rules: Sequence[Mapping[str, Any]] = ()


@dataclass(frozen=True)
class Preset:
    title: str
    description: str = ""
    # The end-to-end budget the form starts with.
    budget: Mapping[str, int] = field(default_factory=dict)
    stages: Sequence[PresetStage] = ()

    @property
    def share_percent(self) -> int:
        return sum(stage.share_percent for stage in self.stages)


def _llm_rules(portion: str) -> list[Rule]:
    return [
        *by_attribute(OPERATION, LLM_OPERATIONS, portion=portion),
        *by_attribute(SPAN_KIND, ["LLM"], portion=portion),
        *by_attribute(REQUEST_TYPE, LLM_REQUEST_TYPES, portion=portion),
        *by_span_name(LLM_SPAN_NAMES, portion=portion),
    ]


EMBEDDING_RULES = [
    *by_attribute(OPERATION, ["embeddings"]),
    *by_attribute(SPAN_KIND, ["EMBEDDING"]),
    *by_attribute(REQUEST_TYPE, ["embedding"]),
    *by_span_name(EMBEDDING_SPAN_NAMES),
]
RETRIEVAL_RULES = [
    *by_attribute(SPAN_KIND, ["RETRIEVER"]),
    *by_attribute(OPERATION, ["retrieval"]),
    *by_store(VECTOR_STORES),
    *by_span_name(RETRIEVAL_SPAN_NAMES),
    *by_span_name(REDIS_SEARCH_SPAN_NAMES),
]
RERANK_RULES = [
    *by_attribute(SPAN_KIND, ["RERANKER"]),
    # Not among the conventions' operations, but what Voyage's instrumentation sets.
    *by_attribute(OPERATION, ["rerank"]),
    *by_attribute(REQUEST_TYPE, ["rerank"]),
    *by_span_name(RERANK_SPAN_NAMES),
]
TTFT_RULES = _llm_rules(Portion.UNTIL_FIRST_TOKEN)
GENERATION_RULES = _llm_rules(Portion.AFTER_FIRST_TOKEN)
TOOL_RULES = [
    *by_attribute(OPERATION, ["execute_tool"]),
    *by_attribute(SPAN_KIND, ["TOOL"]),
    *by_span_name(["execute_tool *"]),
]
AGENT_RULES = [
    *by_attribute(OPERATION, ["invoke_agent", "invoke_workflow"]),
    *by_attribute(SPAN_KIND, ["AGENT"]),
    *by_span_name(["invoke_agent*", "invoke_workflow*"]),
]
GUARDRAIL_RULES = [
    *by_attribute(SPAN_KIND, ["GUARDRAIL"]),
    *by_span_name(["*guardrail*", "*Guardrail*"]),
]


def _ttft(share: int) -> PresetStage:
    return PresetStage("ttft", "Time to first token", share, TTFT_RULES)


def _generation(share: int) -> PresetStage:
    return PresetStage("generation", "Generation", share, GENERATION_RULES)


PRESETS: dict[str, Preset] = {
    "blank": Preset("Blank"),
    "rag-chat": Preset(
        "RAG chat",
        "Retrieval-augmented chat answer: embed the question, retrieve, rerank, then stream.",
        {"p95": 4000},
        [
            PresetStage("embedding", "Embedding", 5, EMBEDDING_RULES),
            PresetStage("retrieval", "Retrieval", 10, RETRIEVAL_RULES),
            PresetStage("rerank", "Rerank", 5, RERANK_RULES),
            _ttft(20),
            _generation(45),
        ],
    ),
    "agent-tools": Preset(
        "Agent with tools",
        "Agent turn: the agent's own steps, tool calls, retrieval, the model's answers, "
        "a guardrail check.",
        {"p95": 8000},
        [
            PresetStage("agent", "Agent steps", 10, AGENT_RULES),
            PresetStage("tool-calls", "Tool calls", 30, TOOL_RULES),
            PresetStage("retrieval", "Retrieval", 5, RETRIEVAL_RULES),
            _ttft(10),
            _generation(30),
            PresetStage("guardrail", "Guardrail", 5, GUARDRAIL_RULES),
        ],
    ),
    "streaming-chat": Preset(
        "Streaming chat",
        "One model call streamed to the user: the wait for its first token, then the rest.",
        {"p95": 3000},
        [_ttft(25), _generation(65)],
    ),
}

PRESET_CHOICES = [(key, preset.title) for key, preset in PRESETS.items()]
