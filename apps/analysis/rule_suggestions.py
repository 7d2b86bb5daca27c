"""A first span rule for a group of spans no stage took, and the stage it is likely for.

The rule is the narrowest that still says what the spans are: the value of a semantic
convention attribute that names the operation (``gen_ai.operation.name=embeddings``,
``openinference.span.kind=RERANKER``, ``db.system.name=qdrant``) when every span of the
group carries the same one, else the span name itself. Either is only a start: the
rule tester shows what it would take before it is saved.

The stage is guessed from words compared with the stage slugs and names by their
first five letters: first those the conventions' values stand for (an ``embeddings``
call is an embedding step, a vector store is retrieval), then those of the span name.
A stage no span reached comes first, then the pipeline's order.
"""

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from apps.pipelines.name_patterns import exact_glob

# In order of preference: the first one every span of a group carries, with one value,
# is the suggested rule.
RULE_KEYS = ("gen_ai.operation.name", "openinference.span.kind", "db.system.name", "db.system")

_LLM = ("ttft", "llm", "gener", "chat", "compl", "answe", "model")
_RETRIEVAL = ("retri", "searc", "vecto", "recal")
_VECTOR_STORES = ("qdrant", "pinecone", "weaviate", "milvus", "chroma", "chromadb", "pgvector",
                  "elasticsearch", "opensearch", "redis", "lancedb")  # fmt: skip
# A value of a convention attribute → the first letters of the stage names it suggests.
_VALUE_WORDS: dict[str, tuple[str, ...]] = {
    # gen_ai.operation.name
    "embeddings": ("embed",),
    "retrieval": _RETRIEVAL,
    "chat": _LLM,
    "text_completion": _LLM,
    "generate_content": _LLM,
    "execute_tool": ("tool",),
    "invoke_agent": ("agent",),
    "create_agent": ("agent",),
    # openinference.span.kind
    "llm": _LLM,
    "retriever": _RETRIEVAL,
    "reranker": ("reran",),
    "embedding": ("embed",),
    "tool": ("tool",),
    "agent": ("agent",),
    "guardrail": ("guard",),
    # db.system / db.system.name of vector stores
    **dict.fromkeys(_VECTOR_STORES, _RETRIEVAL),
}
_WORD = re.compile(r"[a-z]+")
STEM = 5


@dataclass(frozen=True)
class StageChoice:
    slug: str
    name: str


@dataclass(frozen=True)
class RuleSuggestion:
    """A rule for one stage: a span name glob, or one attribute's value."""

    stage_slug: str
    span_name: str = ""
    attribute: tuple[str, str] | None = None

    def describe(self) -> str:
        if self.attribute is not None:
            return f"{self.attribute[0]}={self.attribute[1]}"
        return f"name={self.span_name}"


def _stems(text: str, least: int) -> set[str]:
    return {word[:STEM] for word in _WORD.findall(text.lower()) if len(word) >= least}


def stage_for(
    name: str, values: Iterable[str], stages: Sequence[StageChoice], empty: set[str]
) -> StageChoice | None:
    """The stage a group's attribute values name, else one its span name names (one no span
    reached first, each time); else the first stage no span reached; else the first stage.
    None without stages.

    The values go first: a ``query docs`` span with ``db.system.name=qdrant`` is
    retrieval, whatever a "Query rewrite" stage is called.
    """
    by_value: set[str] = set()
    for value in values:
        by_value.update(_VALUE_WORDS.get(value.lower(), ()))
    for words in (by_value, _stems(name, 4)):
        named = [s for s in stages if _stems(f"{s.slug} {s.name}", 3) & words]
        if named:
            return next((s for s in named if s.slug in empty), named[0])
    return next((s for s in stages if s.slug in empty), stages[0] if stages else None)


def rule_for(name: str, single_values: dict[str, str], stage_slug: str) -> RuleSuggestion:
    """``single_values``: the attributes every span of the group carries with one value."""
    for key in RULE_KEYS:
        if key in single_values:
            return RuleSuggestion(stage_slug, attribute=(key, single_values[key]))
    return RuleSuggestion(stage_slug, span_name=exact_glob(name))
