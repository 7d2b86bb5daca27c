"""A pipeline like the demo's, and simulator traffic sent through the real ingest path."""

import random
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from apps.analysis.services.finalize import traces_finalize_due
from apps.core.time import NS_PER_MS
from apps.demo.traffic import Switches, TracePlanner, TraceShape, emit_trace
from apps.ingest.models import Encoding
from apps.ingest.services.batches import raw_batch_store, raw_batches_drain
from apps.pipelines.models import Pipeline
from apps.teams.models import Team
from tests.builders.configuration import make_pipeline, make_rule, make_stage
from tests.builders.spans import encode

CHAT = {"gen_ai.operation.name": "chat"}
# (slug, p95 budget in ms, rule) as in demo/budgets.yaml, with the tool stage.
STAGES: list[tuple[str, int, dict[str, Any]]] = [
    ("auth", 40, {"span_name": "auth*"}),
    ("history", 120, {"span_name": "history.*"}),
    ("rewrite", 250, {"span_name": "rewrite*"}),
    ("embedding", 120, {"attributes": {"gen_ai.operation.name": "embeddings"}}),
    ("retrieval", 350, {"attributes": {"openinference.span.kind": "RETRIEVER"}}),
    ("rerank", 200, {"attributes": {"openinference.span.kind": "RERANKER"}}),
    ("tool", 600, {"attributes": {"gen_ai.operation.name": "execute_tool"}}),
    ("ttft", 800, {"attributes": CHAT, "portion": "until_first_token"}),
    ("generation", 1200, {"attributes": CHAT, "portion": "after_first_token"}),
]  # fmt: skip
TRACES_PER_BATCH = 100


def rag_pipeline(team: Team, slug: str = "rag-chat") -> Pipeline:
    pipeline = make_pipeline(
        team, slug, name="RAG chat answer", match_service="chat-api",
        match_root_span="POST /chat", budget={"p50": 1200, "p95": 2500},
        objective_target=99, objective_threshold_ms=4000,
    )  # fmt: skip
    for slug_, budget, rule in STAGES:
        make_rule(make_stage(pipeline, slug_, name=slug_.title(), budget_ms=budget), **rule)
    return pipeline


@dataclass
class Sent:
    traces: int
    spans: int


def send_traffic(
    team: Team,
    *,
    traces: int,
    seed: int,
    switches: Switches | None = None,
    end_ns: int | None = None,
) -> Sent:
    """``traces`` simulator requests, spread over the minutes before ``end_ns`` (30 s ago),
    recorded by the OpenTelemetry SDK, encoded by the official OTLP encoder, stored as
    batches, drained and finalized as the workers would."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "chat-api"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("whatif-tests")
    planner = TracePlanner(rng=random.Random(seed), shape=TraceShape(), switches=switches)
    end = end_ns or time.time_ns() - 30 * 10**9  # inside the windows that end now
    spans = 0
    for first in range(0, traces, TRACES_PER_BATCH):
        exporter.clear()
        for index in range(first, min(first + TRACES_PER_BATCH, traces)):
            plan = planner.plan()
            start = end - (traces - index) * 100 * NS_PER_MS - round(plan.root.end_ms * NS_PER_MS)
            emit_trace(tracer=tracer, plan=plan, start_ns=start)
        finished = exporter.get_finished_spans()
        spans += len(finished)
        raw_batch_store(
            team=team, token=None, encoding=Encoding.OTLP_PROTOBUF, body=encode(finished),
            span_count=len(finished),
        )  # fmt: skip
    while raw_batches_drain().more:
        pass
    settled = datetime.fromtimestamp(end / 1e9 + 3600, tz=UTC)
    while traces_finalize_due(now=settled).traces:
        pass
    return Sent(traces, spans)
