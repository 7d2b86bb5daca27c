"""A pipeline of an ordinary app whose rules miss some of its spans: ``POST /ask`` with
its retrieval, rerank and chat calls, as the OpenTelemetry SDK and auto-instrumentation
send them, with known answers for what no stage takes."""

from apps.pipelines.models import NoStageRule, Pipeline
from apps.rollups.services.bucket_pass import rollups_process_dirty
from tests.builders.configuration import make_pipeline, make_rule, make_stage
from tests.builders.ingested_traces import ingest, now_ns
from tests.builders.spans import HandSpan, span
from tests.conftest import TeamWorld
from tests.timing import MS

OPERATION = "gen_ai.operation.name"
TTFC = "gen_ai.response.time_to_first_chunk"
RERANK_HOSTS = ["api.cohere.com", "api.cohere.com", "api.jina.ai"]
EMBED_MS = [(5, 18), (5, 15), None]  # the third trace makes no embeddings call


def ask_pipeline(world: TeamWorld) -> Pipeline:
    """Rules for the application's own retrieval span and the chat call's first token;
    the embedding and rerank rules match nothing this app sends; a metrics flush is in no
    stage on purpose."""
    pipeline = make_pipeline(world.team, "ask", name="Ask", match_root_span="POST /ask")
    make_rule(make_stage(pipeline, "embedding", name="Embedding"), span_name="embeddings *")
    make_rule(make_stage(pipeline, "retrieval", name="Retrieval"), span_name="retrieval")
    make_rule(
        make_stage(pipeline, "rerank", name="Rerank"),
        attributes={"openinference.span.kind": "RERANKER"},
    )
    make_rule(
        make_stage(pipeline, "ttft", name="Time to first token"),
        attributes={OPERATION: "chat"},
        portion="until_first_token",
    )
    NoStageRule.objects.create(pipeline=pipeline, span_name="flush metrics")
    return pipeline


def ask_trace(index: int, t0: int) -> list[HandSpan]:
    """``POST /ask`` 0-1000 ms: an embeddings call (not in the third trace), retrieval
    20-190 holding a database query 40-185, rerank 200-320 holding its HTTP call 205-315,
    a chat call 330-980 whose first token comes at 580, a metrics flush 985-1000 holding
    a redis call 986-999."""
    trace_id = 0xA0 + index

    def at(ms: int) -> int:
        return t0 + ms * MS

    spans = [
        span(1, None, at(0), at(1000), name="POST /ask", kind="server", trace_id=trace_id),
        span(2, 1, at(20), at(190), name="retrieval", trace_id=trace_id),
        span(3, 2, at(40), at(185), name="query docs", kind="client", trace_id=trace_id,
             attributes={"db.system.name": "postgresql"}),
        span(4, 1, at(200), at(320), name="rerank", trace_id=trace_id),
        span(5, 4, at(205), at(315), name="POST /v1/rerank", kind="client", trace_id=trace_id,
             attributes={"http.request.method": "POST", "server.address": RERANK_HOSTS[index],
                         "http.response.body.size": 18_000}),
        span(6, 1, at(330), at(980), name="chat gpt-4o-mini", kind="client", trace_id=trace_id,
             attributes={OPERATION: "chat", TTFC: 0.25}),
        span(7, 1, at(985), at(1000), name="flush metrics", trace_id=trace_id),
        span(8, 7, at(986), at(999), name="SET", kind="client", trace_id=trace_id,
             attributes={"db.system": "redis"}),
    ]  # fmt: skip
    embed = EMBED_MS[index]
    if embed is not None:
        spans.append(
            span(9, 1, at(embed[0]), at(embed[1]), name="embed query", kind="client",
                 trace_id=trace_id, attributes={OPERATION: "embeddings"})
        )  # fmt: skip
    return spans


def ask_traffic(world: TeamWorld, count: int = 3) -> Pipeline:
    """The pipeline with ``count`` traces of the last ten minutes (at most three), stored,
    analyzed and rolled up as the workers would."""
    pipeline = ask_pipeline(world)
    t0 = now_ns() - 10 * 60_000 * MS
    ingest(world.team, *(ask_trace(i, t0 + i * 2000 * MS) for i in range(count)))
    while rollups_process_dirty().buckets:
        pass
    return pipeline
