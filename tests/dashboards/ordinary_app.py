"""An ordinary app's trace as the OpenTelemetry SDK sends it: the application's own spans
with the instrumented calls inside them, and a newcomer's pipeline whose rules name only
the application's spans.

Times in ms from the root's start, and what the critical path is made of:

    POST /ask 0-1000                      own 0-20, 190-200, 320-330, 980-985, 995-1000
      retrieval 20-190                    own 20-25, 185-186, 189-190
        POST /v1/embeddings 25-40
        query docs 40-185
        cache flush 186-189               own 188-189
          redis SET 186-188
      rerank 200-320                      own 200-205, 315-320
        POST /v1/rerank 205-315
      chat gpt-4o-mini 330-980            own 330-332, 978-980; first token at 580
        POST /v1/chat/completions 332-978
      log write 985-995
"""

from apps.pipelines.models import Pipeline
from apps.teams.models import Team
from tests.builders.configuration import make_no_stage_rule, make_pipeline, make_rule, make_stage
from tests.builders.spans import HandSpan, span
from tests.timing import MS

ASK, RETRIEVAL, EMBED, QUERY, FLUSH, REDIS = 0x10, 0x20, 0x21, 0x22, 0x23, 0x24
RERANK, RERANK_HTTP, CHAT, STREAM, LOG = 0x30, 0x31, 0x40, 0x41, 0x50
OPERATION = "gen_ai.operation.name"
TTFC = "gen_ai.response.time_to_first_chunk"


def ordinary_trace(trace_id: int, t0: int) -> list[HandSpan]:
    def at(span_id: int, parent: int | None, start: int, end: int, name: str, **kw) -> HandSpan:
        return span(
            span_id, parent, t0 + start * MS, t0 + end * MS, name=name, trace_id=trace_id, **kw
        )

    return [
        at(ASK, None, 0, 1000, "POST /ask", kind="server"),
        at(RETRIEVAL, ASK, 20, 190, "retrieval"),
        at(EMBED, RETRIEVAL, 25, 40, "POST /v1/embeddings", kind="client"),
        at(QUERY, RETRIEVAL, 40, 185, "query docs", kind="client"),
        at(FLUSH, RETRIEVAL, 186, 189, "cache flush"),
        at(REDIS, FLUSH, 186, 188, "redis SET", kind="client"),
        at(RERANK, ASK, 200, 320, "rerank"),
        at(RERANK_HTTP, RERANK, 205, 315, "POST /v1/rerank", kind="client"),
        at(CHAT, ASK, 330, 980, "chat gpt-4o-mini", kind="client",
           attributes={OPERATION: "chat", TTFC: 0.25}),
        at(STREAM, CHAT, 332, 978, "POST /v1/chat/completions", kind="client"),
        at(LOG, ASK, 985, 995, "log write"),
    ]  # fmt: skip


def newcomer_pipeline(team: Team, *, no_stage: bool = True) -> Pipeline:
    """Rules for the application's own spans only; with ``no_stage``, the cache flush is
    kept out of every stage."""
    pipeline = make_pipeline(
        team, "ask", name="Ask", match_service="chat-api", match_root_span="POST /ask"
    )
    make_rule(make_stage(pipeline, "retrieval", name="Retrieval"), span_name="retrieval")
    make_rule(make_stage(pipeline, "rerank", name="Rerank"), span_name="rerank")
    make_rule(
        make_stage(pipeline, "ttft", name="TTFT"),
        attributes={OPERATION: "chat"},
        portion="until_first_token",
    )
    make_rule(
        make_stage(pipeline, "generation", name="Generation", budget_ms=None),
        attributes={OPERATION: "chat"},
        portion="after_first_token",
    )
    if no_stage:
        make_no_stage_rule(pipeline, span_name="cache flush")
    return pipeline
