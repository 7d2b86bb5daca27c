"""How instrumentation names AI spans, as the presets' rules match them.

Attribute values compare as exact text, so each spelling an instrumentation really
emits is listed: OpenLLMetry writes ``db.system`` "Qdrant" and "Pinecone", Langtrace
"qdrant" and "chromadb", OpenLLMetry "chroma". Sources:

* OpenTelemetry GenAI semantic conventions: ``gen_ai.operation.name`` and span names
  "{operation} {model}" ("chat gpt-4o-mini", "embeddings text-embedding-3-small"),
  "retrieval" or "retrieval {data source}", "execute_tool {tool}", "invoke_agent {agent}";
* OpenTelemetry database conventions: ``db.system`` and its successor ``db.system.name``;
* OpenInference: ``openinference.span.kind``;
* OpenLLMetry (opentelemetry-instrumentation-*): ``llm.request.type`` where older
  versions set no operation name, "cohere.rerank", "voyageai.rerank" (operation
  "rerank"), "qdrant.search", "pinecone.query", "chroma.query", "milvus.search",
  "db.weaviate.*";
* OpenTelemetry's redis instrumentation: "redis.search" for FT.SEARCH, the command
  name otherwise.
"""

from collections.abc import Iterable
from typing import Any

OPERATION = "gen_ai.operation.name"
SPAN_KIND = "openinference.span.kind"
REQUEST_TYPE = "llm.request.type"
DB_SYSTEM = "db.system"
DB_SYSTEM_NAME = "db.system.name"

# Operations that run a model and stream an answer; each is split at its first token.
LLM_OPERATIONS = ("chat", "text_completion", "generate_content")
LLM_REQUEST_TYPES = ("chat", "completion")
LLM_SPAN_NAMES = ("chat *", "text_completion *", "generate_content *", "*.chat", "*.completion")

EMBEDDING_SPAN_NAMES = ("embed*", "*.embed", "*.embeddings")

# Each store's name in db.system.name first, then the other spellings instrumentations
# write in the older db.system (OpenLLMetry's "Qdrant", Langtrace's "chromadb").
VECTOR_STORES: dict[str, tuple[str, ...]] = {
    "qdrant": ("qdrant", "Qdrant"),
    "pinecone": ("pinecone", "Pinecone"),
    "weaviate": ("weaviate",),
    "milvus": ("milvus",),
    "chroma": ("chroma", "chromadb"),
    "pgvector": ("pgvector",),
    "elasticsearch": ("elasticsearch",),
    "opensearch": ("opensearch",),
    "lancedb": ("lancedb",),
    "marqo": ("marqo",),
}
# Redis also holds sessions, caches and rate limits: only its search commands retrieve.
REDIS_SEARCH_SPAN_NAMES = ("redis.search", "FT.SEARCH*", "FT.AGGREGATE*")
RETRIEVAL_SPAN_NAMES = ("retrieval", "retrieval *", "retrieve*", "*.retrieve", "vector.search*")

RERANK_SPAN_NAMES = ("*rerank*", "*Rerank*")

Rule = dict[str, Any]


def by_attribute(key: str, values: Iterable[str], **extra: Any) -> list[Rule]:
    """One rule per value: a rule's attribute conditions must all hold, so "any of"
    takes a rule each."""
    return [{"attributes": {key: value}, **extra} for value in values]


def by_span_name(globs: Iterable[str], **extra: Any) -> list[Rule]:
    return [{"span_name": glob, **extra} for glob in globs]


def by_store(stores: Iterable[str]) -> list[Rule]:
    """Spans of the named stores: every spelling of db.system, the conventions' name of
    db.system.name (which only instrumentations following the new conventions set)."""
    names = [VECTOR_STORES[store] for store in stores]
    return by_attribute(DB_SYSTEM, [value for spellings in names for value in spellings]) + (
        by_attribute(DB_SYSTEM_NAME, [spellings[0] for spellings in names])
    )
