"""The presets' rules on the spans real instrumentation emits, and on an ordinary app's
traces sent through ingestion: every stage gets samples without a hand-written rule."""

from typing import Any

import pytest

from apps.analysis.models import StageSample
from apps.analysis.stage_matching import StageMatcher, stage_specs_from_pipeline
from apps.ingest.models import Trace
from apps.pipelines.models import Pipeline
from apps.pipelines.presets import pipeline_create_from_preset
from apps.pipelines.selectors import pipeline_with_stages
from apps.teams.models import Team
from tests.builders.configuration import make_team
from tests.builders.ingested_traces import ingest, now_ns
from tests.builders.spans import ASK_QUERY, ask_spans, span
from tests.timing import MS

pytestmark = pytest.mark.django_db
SECOND = 1000 * MS

# (span name, attributes, span kind) as each instrumentation writes them, and the
# stage of the "RAG chat" preset that takes the span (None: no stage's rule).
RAG_SPANS: list[tuple[str, dict[str, Any], str | None]] = [
    # OpenTelemetry GenAI semantic conventions (e.g. opentelemetry-instrumentation-openai-v2)
    ("embeddings text-embedding-3-small", {"gen_ai.operation.name": "embeddings"}, "embedding"),
    ("chat gpt-4o-mini", {"gen_ai.operation.name": "chat"}, "ttft"),
    ("text_completion gpt-3.5-turbo-instruct", {"gen_ai.operation.name": "text_completion"},
     "ttft"),
    ("generate_content gemini-2.0-flash", {"gen_ai.operation.name": "generate_content"}, "ttft"),
    ("retrieval", {"gen_ai.operation.name": "retrieval"}, "retrieval"),
    ("retrieval docs-index", {}, "retrieval"),
    ("chat gpt-4o-mini", {}, "ttft"),  # the span name alone
    # Vector stores through the database conventions, old and new attribute
    ("query docs", {"db.system.name": "qdrant"}, "retrieval"),
    ("search", {"db.system.name": "opensearch"}, "retrieval"),
    ("search", {"db.system": "elasticsearch"}, "retrieval"),
    ("query", {"db.system.name": "milvus"}, "retrieval"),
    ("query", {"db.system.name": "pgvector"}, "retrieval"),
    # OpenLLMetry (opentelemetry-instrumentation-qdrant, -pinecone, -chromadb, …)
    ("qdrant.query_points", {"db.system": "Qdrant"}, "retrieval"),
    ("pinecone.query", {"db.system": "Pinecone"}, "retrieval"),
    ("chroma.query", {"db.system": "chroma"}, "retrieval"),
    ("milvus.search", {"db.system": "milvus"}, "retrieval"),
    ("db.weaviate.collections.query.near_text", {"db.system": "weaviate"}, "retrieval"),
    ("lancedb.search", {"db.system": "lancedb"}, "retrieval"),
    ("openai.embeddings", {"llm.request.type": "embedding"}, "embedding"),
    ("openai.chat", {"llm.request.type": "chat"}, "ttft"),
    ("cohere.rerank", {"llm.request.type": "rerank", "gen_ai.system": "Cohere"}, "rerank"),
    ("cohere.embed", {"llm.request.type": "embedding"}, "embedding"),
    ("voyageai.rerank", {"gen_ai.operation.name": "rerank"}, "rerank"),
    ("voyageai.embed", {"gen_ai.operation.name": "embeddings"}, "embedding"),
    # Langtrace
    ("chromadb.collection.query", {"db.system": "chromadb"}, "retrieval"),
    ("qdrant.search", {"db.system": "qdrant"}, "retrieval"),
    # OpenInference (LlamaIndex, LangChain)
    ("VectorIndexRetriever.retrieve", {"openinference.span.kind": "RETRIEVER"}, "retrieval"),
    ("OpenAIEmbedding.get_query_embedding", {"openinference.span.kind": "EMBEDDING"},
     "embedding"),
    ("CohereRerank.postprocess_nodes", {"openinference.span.kind": "RERANKER"}, "rerank"),
    ("ChatOpenAI", {"openinference.span.kind": "LLM"}, "ttft"),
    # Rerank providers called by hand, named after the call
    ("rerank", {}, "rerank"),
    ("jina.rerank", {}, "rerank"),
    ("JinaRerank", {}, "rerank"),
    # Redis: its search commands retrieve; its other commands are caches and sessions
    ("redis.search", {"db.system": "redis"}, "retrieval"),
    ("FT.SEARCH", {"db.system.name": "redis"}, "retrieval"),
    ("GET", {"db.system": "redis"}, None),
    ("HGETALL", {"db.system.name": "redis"}, None),
    # What no preset stage takes: the request itself, plain SQL and HTTP
    ("POST /ask", {"http.request.method": "POST"}, None),
    ("SELECT docs", {"db.system": "postgresql"}, None),
    ("POST", {"http.request.method": "POST", "server.address": "api.openai.com"}, None),
]  # fmt: skip
AGENT_SPANS: list[tuple[str, dict[str, Any], str | None]] = [
    ("invoke_agent support-bot", {"gen_ai.operation.name": "invoke_agent"}, "agent"),
    ("execute_tool get_weather", {"gen_ai.operation.name": "execute_tool"}, "tool-calls"),
    ("lookup_order", {"openinference.span.kind": "TOOL"}, "tool-calls"),
    ("Agent", {"openinference.span.kind": "AGENT"}, "agent"),
    ("input_guardrail", {"openinference.span.kind": "GUARDRAIL"}, "guardrail"),
    ("qdrant.search", {"db.system": "qdrant"}, "retrieval"),
    ("chat claude-sonnet-4", {"gen_ai.operation.name": "chat"}, "ttft"),
]


@pytest.fixture
def team() -> Team:
    return make_team("acme")


def matcher_for(team: Team, preset: str) -> StageMatcher:
    pipeline = pipeline_create_from_preset(
        team=team, preset=preset, slug=preset, name=preset, budget={"p95": 2000}
    )
    return StageMatcher(stage_specs_from_pipeline(pipeline_with_stages(pipeline=pipeline)))


@pytest.mark.parametrize(
    ("preset", "examples"), [("rag-chat", RAG_SPANS), ("agent-tools", AGENT_SPANS)]
)
def test_presets_take_the_spans_instrumentation_emits(
    team: Team, preset: str, examples: list[tuple[str, dict[str, Any], str | None]]
) -> None:
    matcher = matcher_for(team, preset)
    taken = {
        (name, tuple(attributes.items())): matcher.match(
            span("s", None, 0, 100 * MS, name=name, attributes=attributes)
        ).before_stage
        for name, attributes, _ in examples
    }
    expected = {(name, tuple(attrs.items())): stage for name, attrs, stage in examples}
    assert taken == expected


def test_a_model_call_splits_at_its_first_chunk(team: Team) -> None:
    matcher = matcher_for(team, "rag-chat")
    call = span(
        "c", None, 0, 1000 * MS, name="chat gpt-4o-mini",
        attributes={"gen_ai.operation.name": "chat", "gen_ai.response.time_to_first_chunk": 0.25},
    )  # fmt: skip
    match = matcher.match(call)
    assert (match.first_token_ns, match.before_stage, match.after_stage) == (
        250 * MS, "ttft", "generation",
    )  # fmt: skip


def rag_pipeline(team: Team) -> Pipeline:
    return pipeline_create_from_preset(
        team=team, preset="rag-chat", slug="ask", name="Ask", budget={"p95": 2000}
    )


def samples_by_stage(pipeline: Pipeline) -> dict[str, list[tuple[int, int]]]:
    names = dict(pipeline.stages.values_list("pk", "slug"))
    found: dict[str, list[tuple[int, int]]] = {slug: [] for slug in names.values()}
    for sample in StageSample.objects.filter(pipeline_id=pipeline.pk).order_by("start_ns"):
        found[names[sample.stage_id]].append((sample.wall_ns // MS, sample.critical_ns // MS))
    return found


def test_every_stage_of_rag_chat_gets_samples_from_an_ordinary_app(team: Team) -> None:
    pipeline = rag_pipeline(team)
    t0 = now_ns() - 600 * SECOND
    ingest(team, *(ask_spans(0xA0 + n, t0 + n * 2 * SECOND) for n in range(3)))

    # Known answers, worked out from the spans: the qdrant query (55-200 ms) is
    # retrieval's own; the retrieval span's 50-55 ms between its children is too.
    expected = {
        "embedding": (40, 40),
        "retrieval": (190, 150),
        "rerank": (125, 125),
        "ttft": (400, 400),
        "generation": (755, 755),
    }
    assert samples_by_stage(pipeline) == {slug: [walls] * 3 for slug, walls in expected.items()}
    trace = Trace.objects.filter(pipeline=pipeline).first()
    assert trace is not None
    assert (trace.start_ns, trace.end_ns) == (t0, t0 + 1500 * MS)
    # 0-10, 200-205, 330-335 and 1490-1500 ms belong to the request span alone: 2 %.
    assert trace.untracked_critical_ns == 30 * MS


def test_a_plain_sql_query_under_retrieval_counts_in_retrieval_through_its_parent(
    team: Team,
) -> None:
    pipeline = rag_pipeline(team)
    t0 = now_ns() - 600 * SECOND
    postgres = {"db.system.name": "postgresql", "db.query.text": "SELECT * FROM docs"}
    ingest(team, ask_spans(0xB0, t0, store=postgres))

    # The same figures as with a vector store: the query (55-200 ms) has no rule of its
    # own, so it is retrieval's as the span it runs in is.
    assert samples_by_stage(pipeline) == {
        "embedding": [(40, 40)], "retrieval": [(190, 150)], "rerank": [(125, 125)],
        "ttft": [(400, 400)], "generation": [(755, 755)],
    }  # fmt: skip
    trace = Trace.objects.get(pipeline=pipeline)
    assert trace.untracked_critical_ns == 30 * MS
    matcher = StageMatcher(stage_specs_from_pipeline(pipeline_with_stages(pipeline=pipeline)))
    query = next(s for s in ask_spans(store=postgres) if int(s.span_id, 16) == ASK_QUERY)
    # No preset rule claims plain SQL: a query may fetch anything.
    assert matcher.match(query).before_stage is None
