"""The official OpenTelemetry exporter against a live server, and with a real worker."""

import time
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExportResult
from opentelemetry.trace import SpanKind, set_span_in_context

from apps.analysis.models import StageSample
from apps.ingest.models import RawBatch, Trace, TraceState
from apps.pipelines.models import Pipeline
from apps.teams.services import ingest_token_revoke
from tests.builders.configuration import make_pipeline, make_rule, make_stage
from tests.builders.spans import sdk_span
from tests.conftest import TeamWorld
from tests.ingest.endpoint_helpers import batch_spans, chat_spans, ingest_token
from tests.processes import celery_worker, wait_for
from tests.timing import MS


def exporter(live_server: Any, token: str, **kwargs: Any) -> OTLPSpanExporter:
    return OTLPSpanExporter(
        endpoint=live_server.url + "/v1/traces",
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
        **kwargs,
    )


@pytest.mark.parametrize("compression", [Compression.NoCompression, Compression.Gzip])
def test_the_official_exporter_delivers_sdk_spans(
    live_server: Any, world: TeamWorld, compression: Compression
) -> None:
    span_exporter = exporter(live_server, ingest_token(world.team), compression=compression)

    spans = [sdk_span(s) for s in chat_spans(6)]
    result = span_exporter.export(spans)
    span_exporter.shutdown()

    assert result == SpanExportResult.SUCCESS
    batch = RawBatch.objects.get()
    assert (batch.team, batch.span_count) == (world.team, 6)
    stored = batch_spans(batch)
    assert sorted((row[1], row[5]) for row in stored) == sorted(
        (span.context.span_id.to_bytes(8, "big"), span.name) for span in spans
    )


def test_the_exporter_reports_failure_for_a_revoked_token(
    live_server: Any, world: TeamWorld
) -> None:
    raw = ingest_token(world.team)
    ingest_token_revoke(token=world.team.ingest_tokens.get())
    span_exporter = exporter(live_server, raw)

    result = span_exporter.export([sdk_span(s) for s in chat_spans(2)])
    span_exporter.shutdown()

    assert result == SpanExportResult.FAILURE
    assert not RawBatch.objects.exists()


def rag_pipeline(world: TeamWorld) -> Pipeline:
    pipeline = make_pipeline(
        world.team, "rag-chat", match_service="chat-api", match_root_span="POST /chat"
    )
    make_rule(make_stage(pipeline, "auth"), span_name="auth*")
    make_rule(make_stage(pipeline, "retrieval"), span_name="vector.search*")
    chat = {"gen_ai.operation.name": "chat"}
    make_rule(make_stage(pipeline, "ttft"), attributes=chat, portion="until_first_token")
    make_rule(make_stage(pipeline, "generation"), attributes=chat, portion="after_first_token")
    return pipeline


def produce_rag_trace(provider: TracerProvider) -> None:
    """Root 0-1000 ms: auth 0-50, retrievals 50-200 and 50-300 side by side,
    an LLM call 300-950 whose first token arrives at 500."""
    tracer = provider.get_tracer("chat-api.handlers")
    t0 = time.time_ns()
    root = tracer.start_span("POST /chat", kind=SpanKind.SERVER, start_time=t0)
    inside = set_span_in_context(root)

    def child(name: str, start_ms: int, end_ms: int, **kwargs: Any) -> Any:
        span = tracer.start_span(name, context=inside, start_time=t0 + start_ms * MS, **kwargs)
        return span, t0 + end_ms * MS

    auth, auth_end = child("auth.check", 0, 50)
    auth.end(end_time=auth_end)
    search_a, a_end = child("vector.search a", 50, 200, kind=SpanKind.CLIENT)
    search_b, b_end = child("vector.search b", 50, 300, kind=SpanKind.CLIENT)
    search_a.end(end_time=a_end)
    search_b.end(end_time=b_end)
    llm, llm_end = child(
        "chat gpt-4o", 300, 950, kind=SpanKind.CLIENT, attributes={"gen_ai.operation.name": "chat"}
    )
    llm.add_event("first_token", timestamp=t0 + 500 * MS)
    llm.end(end_time=llm_end)
    root.end(end_time=t0 + 1000 * MS)


@pytest.mark.worker
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_exported_traces_come_out_finalized_with_stages_and_critical_path(
    live_server: Any, world: TeamWorld, tmp_path: Path
) -> None:
    pipeline = rag_pipeline(world)
    stages = dict(pipeline.stages.values_list("pk", "slug"))
    provider = TracerProvider(resource=Resource({"service.name": "chat-api"}))
    provider.add_span_processor(BatchSpanProcessor(exporter(live_server, ingest_token(world.team))))
    log = tmp_path / "worker.log"

    def finalized() -> Trace | None:
        trace = Trace.objects.filter(team=world.team, state=TraceState.FINALIZED).first()
        if trace and StageSample.objects.filter(trace_pk=trace.pk).exists():
            return trace
        return None

    with celery_worker(log, beat=True, env={"TRACE_IDLE_SECONDS": "1"}):
        produce_rag_trace(provider)
        assert provider.force_flush(timeout_millis=10_000)
        done = wait_for(lambda: finalized() is not None, timeout=60, interval=0.5)
    provider.shutdown()

    worker_log = log.read_text()
    assert done, f"the trace was not finalized; worker log:\n{worker_log[-4000:]}"
    trace = finalized()
    assert trace is not None
    assert trace.pipeline == pipeline
    assert not trace.incomplete
    assert trace.span_count == 5
    assert trace.duration_ns == 1000 * MS
    samples = {
        stages[s.stage_id]: (s.wall_ns // MS, s.critical_ns // MS)
        for s in StageSample.objects.filter(trace_pk=trace.pk)
    }
    assert samples == {
        "auth": (50, 50),
        "retrieval": (250, 250),  # the slower of the two parallel searches
        "ttft": (200, 200),
        "generation": (450, 450),
    }
    critical = sum(s.critical_ns for s in StageSample.objects.filter(trace_pk=trace.pk))
    assert critical + trace.untracked_critical_ns == trace.duration_ns
    assert trace.untracked_critical_ns == 50 * MS
    assert not RawBatch.objects.exists()
    assert "apps.ingest.tasks.drain_raw_batches" in worker_log
    assert "apps.analysis.tasks.finalize_quiet_traces" in worker_log
