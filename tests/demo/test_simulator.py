"""The traffic simulator: trace shapes, and the command sending them over OTLP/HTTP."""

import gzip
import io
import os
import random
import re
import signal
import socket
import stat
import statistics
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from apps.alerts.models import Channel
from apps.alerts.selectors.recipients import channels_recipient_statuses
from apps.demo.traffic import (
    CountingExporter,
    Profile,
    Switches,
    TracePlanner,
    TraceShape,
    drain,
    emit_trace,
    shape_for_pipeline,
)
from apps.demo.traffic.llm_call import (
    CHUNK_EVENT,
    ENGINE_SPAN,
    FALLBACK_MODEL,
    FALLBACK_PROVIDER,
    PRIMARY_MODEL,
    PRIMARY_PROVIDER,
)
from apps.ingest.models import RawBatch
from apps.pipelines.models import Pipeline
from apps.teams.models import IngestToken, Team
from apps.teams.services import ingest_token_create, ingest_token_revoke
from tests.builders.configuration import make_pipeline, make_team
from tests.builders.spans import T0
from tests.ingest.endpoint_helpers import batch_spans
from tests.processes import ROOT, process_env, wait_for
from tests.timing import S

# ---------------------------------------------------------------- trace shapes


def emitted(
    count: int,
    *,
    seed: int = 7,
    profile: Profile | None = None,
    shape: TraceShape | None = None,
    switches: Switches | None = None,
) -> list[list[ReadableSpan]]:
    """`count` traces replayed into an in-memory exporter, each as its spans, root first."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    planner = TracePlanner(
        rng=random.Random(seed), shape=shape or TraceShape(), profile=profile, switches=switches
    )
    for i in range(count):
        emit_trace(tracer=tracer, plan=planner.plan(), start_ns=T0 + i * S)
    by_trace: dict[int, list[ReadableSpan]] = defaultdict(list)
    for span in exporter.get_finished_spans():
        assert span.context is not None
        by_trace[span.context.trace_id].append(span)
    return [sorted(spans, key=lambda s: s.parent is not None) for spans in by_trace.values()]


def start(span: ReadableSpan) -> int:
    assert span.start_time is not None
    return span.start_time


def end(span: ReadableSpan) -> int:
    assert span.end_time is not None
    return span.end_time


def named(spans: list[ReadableSpan], prefix: str) -> list[ReadableSpan]:
    return [span for span in spans if span.name.startswith(prefix)]


def test_a_trace_is_a_server_root_with_the_rag_chat_steps_in_order() -> None:
    [spans] = emitted(1, profile=Profile(error_rate=0, outlier_rate=0, tool_rate=0))
    root = spans[0]
    assert root.parent is None
    assert (root.name, root.kind) == ("POST /chat", SpanKind.SERVER)
    assert root.attributes is not None
    assert root.attributes["http.route"] == "/chat"
    children = sorted(
        (s for s in spans if s.parent and s.parent.span_id == root.context.span_id), key=start
    )
    assert [s.name.split(" ")[0] for s in children] == [
        "auth.verify_session",
        "history.load",
        "rewrite_query",
        "embeddings",
        "retrieve_documents",
        "rerank",
        "chat",
    ]
    embedding = named(spans, "embeddings")[0].attributes or {}
    assert embedding["gen_ai.operation.name"] == "embeddings"
    assert embedding["gen_ai.request.model"] == "text-embedding-3-small"
    assert embedding["openinference.span.kind"] == "EMBEDDING"
    assert (named(spans, "rerank")[0].attributes or {})["openinference.span.kind"] == "RERANKER"
    chat = named(spans, "chat")[0].attributes or {}
    assert chat["gen_ai.operation.name"] == "chat"
    assert (chat["gen_ai.provider.name"], chat["gen_ai.request.model"]) in {
        (PRIMARY_PROVIDER, PRIMARY_MODEL),
        (FALLBACK_PROVIDER, FALLBACK_MODEL),
    }
    assert int(chat["gen_ai.usage.input_tokens"]) > 0  # type: ignore[arg-type]
    assert int(chat["gen_ai.usage.output_tokens"]) > 0  # type: ignore[arg-type]
    assert all(span.status.status_code == StatusCode.UNSET for span in spans)


def test_retrieval_fans_out_to_overlapping_shards_and_the_slowest_holds_up_rerank() -> None:
    shard_counts = set()
    for spans in emitted(100, profile=Profile(error_rate=0)):
        shards = named(spans, "vector.search shard-")
        shard_counts.add(len(shards))
        for shard in shards:
            assert (shard.attributes or {})["openinference.span.kind"] == "RETRIEVER"
            others = [s for s in shards if s is not shard]
            assert all(start(shard) < end(o) and start(o) < end(shard) for o in others)
        [fan_out] = named(spans, "retrieve_documents")
        assert {s.parent.span_id for s in shards if s.parent} == {fan_out.context.span_id}
        slowest = max(end(s) for s in shards)
        [rerank] = named(spans, "rerank")
        assert slowest <= end(fan_out) <= start(rerank)
    assert shard_counts == {2, 3, 4}


def test_the_first_token_falls_inside_the_llm_span_by_attribute_or_by_event() -> None:
    ways = {"attribute": 0, "event": 0}
    for spans in emitted(200, profile=Profile(error_rate=0)):
        [chat] = named(spans, "chat ")
        attributes = chat.attributes or {}
        events = [e for e in chat.events if e.name == "first_token"]
        if "gen_ai.response.time_to_first_chunk" in attributes:
            assert not events
            seconds = float(attributes["gen_ai.response.time_to_first_chunk"])  # type: ignore[arg-type]
            first_token = start(chat) + round(seconds * 1e9)
            ways["attribute"] += 1
        else:
            [event] = events
            first_token = event.timestamp
            ways["event"] += 1
        assert start(chat) < first_token < end(chat)
    assert 70 <= ways["attribute"] <= 130
    assert ways["attribute"] + ways["event"] == 200


def test_every_span_lies_within_its_parent_and_the_root_covers_all() -> None:
    for spans in emitted(200, profile=Profile(error_rate=0.1, outlier_rate=0.1, tool_rate=0.5)):
        by_id = {span.context.span_id: span for span in spans if span.context}
        roots = [span for span in spans if span.parent is None]
        assert len(roots) == 1
        for span in spans:
            assert start(span) <= end(span)
            assert start(roots[0]) <= start(span)
            assert end(span) <= end(roots[0])
            if span.parent is not None:
                parent = by_id[span.parent.span_id]
                assert start(parent) <= start(span)
                assert end(span) <= end(parent)


def test_the_error_rate_is_roughly_as_configured_with_a_fixed_seed() -> None:
    def error_share(rate: float, count: int) -> float:
        planner = TracePlanner(
            rng=random.Random(42), shape=TraceShape(), profile=Profile(error_rate=rate)
        )
        return sum(planner.plan().error for _ in range(count)) / count

    assert 0.007 <= error_share(0.01, 20_000) <= 0.013
    assert 0.22 <= error_share(0.25, 4_000) <= 0.28
    assert error_share(0.0, 2_000) == 0


def test_a_failed_step_marks_the_root_and_ends_the_request() -> None:
    traces = emitted(300, profile=Profile(error_rate=0.3))
    failed = [spans for spans in traces if spans[0].status.status_code == StatusCode.ERROR]
    assert 60 <= len(failed) <= 120
    for spans in failed:
        root, *children = spans
        assert (root.attributes or {})["http.response.status_code"] == 500
        broken = [s for s in children if s.status.status_code == StatusCode.ERROR]
        assert broken
        assert all(any(e.name == "exception" for e in s.events) for s in broken)
        first_failure = min(end(s) for s in broken)
        assert all(start(s) < first_failure for s in children)
    ok = [spans for spans in traces if spans[0].status.status_code != StatusCode.ERROR]
    assert all(not any(s.status.status_code == StatusCode.ERROR for s in t) for t in ok)


def test_durations_have_realistic_medians_slow_outliers_and_tool_calls() -> None:
    traces = emitted(2000, profile=Profile(error_rate=0))

    def median_ms(prefix: str) -> float:
        return statistics.median(
            (end(s) - start(s)) / 1e6 for spans in traces for s in named(spans, prefix)
        )

    assert 8 <= median_ms("auth") <= 12
    assert 50 <= median_ms("history") <= 70
    assert 120 <= median_ms("rewrite") <= 180
    assert 32 <= median_ms("embeddings") <= 48
    assert 100 <= median_ms("vector.search") <= 140
    assert 65 <= median_ms("rerank") <= 95
    assert 1100 <= median_ms("chat ") <= 1600  # time to first token + generation
    with_tools = [spans for spans in traces if named(spans, "execute_tool")]
    assert 0.15 <= len(with_tools) / len(traces) <= 0.25
    for spans in with_tools:
        for tool in named(spans, "execute_tool"):
            assert (tool.attributes or {})["gen_ai.operation.name"] == "execute_tool"
    auth = sorted((end(s) - start(s)) / 1e6 for spans in traces for s in named(spans, "auth"))
    assert auth[-1] > 3 * 10  # an outlier, far past the lognormal tail of ~2.5x


def test_history_and_rewrite_start_together_when_switched_to_concurrent() -> None:
    quiet = Profile(error_rate=0, outlier_rate=0, tool_rate=0)
    for spans in emitted(50, profile=quiet, switches=Switches(concurrent_history_rewrite=True)):
        [history], [rewrite] = named(spans, "history.load"), named(spans, "rewrite_query")
        [embedding] = named(spans, "embeddings")
        assert start(history) == start(rewrite)
        assert max(end(history), end(rewrite)) <= start(embedding)
    for spans in emitted(50, profile=quiet):
        [history], [rewrite] = named(spans, "history.load"), named(spans, "rewrite_query")
        assert end(history) <= start(rewrite)


def test_rerank_is_left_out_when_switched_off() -> None:
    traces = emitted(100, profile=Profile(error_rate=0.2), switches=Switches(skip_rerank=True))
    assert not any(named(spans, "rerank") for spans in traces)
    for spans in traces:
        if spans[0].status.status_code == StatusCode.ERROR:
            # A failing request failed at a step that ran, not at the rerank left out.
            assert any(s.status.status_code == StatusCode.ERROR for s in spans[1:])


def test_a_retrieval_cache_answers_its_share_of_requests_in_milliseconds() -> None:
    traces = emitted(
        1000, profile=Profile(error_rate=0), switches=Switches(retrieval_cache_hit_ratio=0.4)
    )
    hits = [named(spans, "vector.search cache") for spans in traces]
    assert 0.35 <= sum(1 for h in hits if h) / len(traces) <= 0.45
    hit_ms = [(end(s) - start(s)) / 1e6 for found in hits for s in found]
    assert 12 <= statistics.median(hit_ms) <= 18
    for spans, found in zip(traces, hits, strict=True):
        # A hit replaces the fan-out to the shards.
        assert bool(found) != bool(named(spans, "retrieve_documents"))


def _after_first_token_ns(span: ReadableSpan) -> float:
    ttft_s = float((span.attributes or {})["gen_ai.response.time_to_first_chunk"])  # type: ignore[arg-type]
    return end(span) - start(span) - ttft_s * 1e9


def test_generation_speedup_shortens_the_part_after_the_first_token() -> None:
    def generation_ns(switches: Switches | None) -> float:
        chats = [s for t in emitted(400, seed=11, switches=switches) for s in named(t, "chat ")]
        timed = [s for s in chats if "gen_ai.response.time_to_first_chunk" in (s.attributes or {})]
        return statistics.median(_after_first_token_ns(s) for s in timed)

    ratio = generation_ns(Switches(generation_speedup=0.2)) / generation_ns(None)
    assert 0.75 <= ratio <= 0.85


def test_switches_out_of_range_are_refused() -> None:
    with pytest.raises(ValueError, match="hit ratio"):
        Switches(retrieval_cache_hit_ratio=1.5)
    with pytest.raises(ValueError, match="speed-up"):
        Switches(generation_speedup=1.0)


def test_the_same_seed_gives_the_same_shapes() -> None:
    def shapes(seed: int) -> list[list[tuple[str, int, int]]]:
        return [
            [(s.name, start(s) - start(spans[0]), end(s) - start(s)) for s in spans]
            for spans in emitted(20, seed=seed)
        ]

    assert shapes(3) == shapes(3)
    assert shapes(3) != shapes(4)


def test_the_shape_follows_the_pipeline_match() -> None:
    pipeline = Pipeline(
        match_service="support-bot",
        match_root_span="POST /v2/answer",
        match_attributes={"app.tier": "gold", "nested": {"ignored": True}},
    )
    shape = shape_for_pipeline(pipeline=pipeline)
    assert shape == TraceShape("support-bot", "POST /v2/answer", {"app.tier": "gold"})
    [spans] = emitted(1, shape=shape)
    assert spans[0].name == "POST /v2/answer"
    assert (spans[0].attributes or {})["app.tier"] == "gold"
    assert (spans[0].attributes or {})["http.route"] == "/v2/answer"

    assert shape_for_pipeline(pipeline=Pipeline(match_root_span="POST /chat*")) == TraceShape()
    assert shape_for_pipeline(pipeline=Pipeline(match_root_span="[PG]* /chat")).root_span == (
        "POST /chat"
    )


# ---------------------------------------------------------------- the command


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    """A stand-in OTLP/HTTP server that records what it is sent."""

    trace_status: int = 200
    healthz_failures: int = 0
    url: str = ""
    posts: list[Received] = field(default_factory=list)
    healthz_calls: int = 0

    def requests(self) -> list[ExportTraceServiceRequest]:
        out = []
        for post in self.posts:
            body = post.body
            if post.headers.get("content-encoding") == "gzip":
                body = gzip.decompress(body)
            out.append(ExportTraceServiceRequest.FromString(body))
        return out


@contextmanager
def receiver(**options: Any) -> Iterator[Receiver]:
    state = Receiver(**options)
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            with lock:
                state.healthz_calls += 1
                up = state.healthz_calls > state.healthz_failures
            self._answer(200 if up and self.path == "/healthz" else 503, b"{}", "application/json")

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            with lock:
                # Header names are case-insensitive: the exporter sends them lowercase.
                headers = {key.lower(): value for key, value in self.headers.items()}
                state.posts.append(Received(self.path, headers, body))
            payload = ExportTraceServiceResponse().SerializeToString()
            status = state.trace_status if self.path == "/v1/traces" else 404
            self._answer(status, payload, "application/x-protobuf")

        def _answer(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


def simulate(**options: Any) -> str:
    out = io.StringIO()
    call_command("simulate_traffic", stdout=out, **options)
    return out.getvalue()


@pytest.fixture
def chat(db: None) -> tuple[Team, Pipeline, str]:
    team = make_team("acme")
    pipeline = make_pipeline(
        team, "support", match_service="support-bot", match_root_span="POST /answer"
    )
    _token, raw = ingest_token_create(team=team, name="sim", created_by=None)
    return team, pipeline, raw


def test_the_command_sends_traces_through_the_otlp_exporter_at_the_rate(
    chat: tuple[Team, Pipeline, str],
) -> None:
    _team, _pipeline, raw = chat
    with receiver() as server:
        output = simulate(
            team="acme", pipeline="support", rps=10, duration=2, url=server.url, token=raw, seed=1
        )
    assert server.posts
    assert {post.path for post in server.posts} == {"/v1/traces"}
    assert {post.headers["authorization"] for post in server.posts} == {f"Bearer {raw}"}
    assert {post.headers["content-type"] for post in server.posts} == {"application/x-protobuf"}
    spans_by_trace: dict[bytes, list[Any]] = defaultdict(list)
    span_count = 0
    for request in server.requests():
        for resource_spans in request.resource_spans:
            attributes = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
            assert attributes["service.name"] == "support-bot"
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    assert len(span.trace_id) == 16
                    assert len(span.span_id) == 8
                    spans_by_trace[span.trace_id].append(span)
                    span_count += 1
    assert 17 <= len(spans_by_trace) <= 21  # ten a second for two seconds
    for spans in spans_by_trace.values():
        ids = {span.span_id for span in spans}
        roots = [span for span in spans if not span.parent_span_id]
        assert [root.name for root in roots] == ["POST /answer"]
        assert all(span.parent_span_id in ids for span in spans if span.parent_span_id)
        assert any(span.name.startswith("vector.search shard-") for span in spans)
    assert f"Sent {len(spans_by_trace)} traces ({span_count} spans" in output
    assert f"{span_count} spans exported; export failures: 0 (0 spans)" in output
    assert raw not in output


def test_the_command_compresses_with_gzip_when_asked(chat: tuple[Team, Pipeline, str]) -> None:
    _team, _pipeline, raw = chat
    with receiver() as server:
        simulate(
            team="acme",
            pipeline="support",
            rps=20,
            duration=0.3,
            url=server.url,
            token=raw,
            gzip=True,
        )
    assert {post.headers.get("content-encoding") for post in server.posts} == {"gzip"}
    assert sum(len(r.resource_spans) for r in server.requests()) >= 1


def test_the_command_waits_until_the_server_answers_healthz(
    chat: tuple[Team, Pipeline, str],
) -> None:
    _team, _pipeline, raw = chat
    with receiver(healthz_failures=3) as server:
        simulate(
            team="acme",
            pipeline="support",
            rps=5,
            duration=0.2,
            url=server.url + "/v1/traces",
            token=raw,
        )
    assert server.healthz_calls == 4
    assert server.posts


def test_the_command_gives_up_when_no_server_answers(chat: tuple[Team, Pipeline, str]) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(CommandError, match=r"No server answered at .*/healthz within 1 s"):
        simulate(
            team="acme", pipeline="support", url=f"http://127.0.0.1:{port}", token=chat[2], wait=1
        )


def test_export_failures_are_counted_in_the_summary(chat: tuple[Team, Pipeline, str]) -> None:
    with receiver(trace_status=401) as server:
        output = simulate(
            team="acme", pipeline="support", rps=10, duration=0.3, url=server.url, token=chat[2]
        )
    assert server.posts
    assert "0 spans exported; export failures: 1 (" in output


def test_the_demo_team_uses_the_token_demo_setup_saved(
    db: None, settings: Any, tmp_path: Path
) -> None:
    settings.VAR_DIR = tmp_path
    call_command("demo_setup", stdout=io.StringIO())
    raw = (tmp_path / "demo-ingest-token").read_text().strip()
    with receiver() as server:
        simulate(team="demo", pipeline="rag-chat", rps=10, duration=0.3, url=server.url)
    assert {post.headers["authorization"] for post in server.posts} == {f"Bearer {raw}"}
    services = {
        attribute.value.string_value
        for request in server.requests()
        for resource_spans in request.resource_spans
        for attribute in resource_spans.resource.attributes
        if attribute.key == "service.name"
    }
    assert services == {"chat-api"}


def test_demo_setup_saves_a_private_ingest_token_and_reuses_it(
    db: None, settings: Any, tmp_path: Path
) -> None:
    settings.VAR_DIR = tmp_path
    out = io.StringIO()
    call_command("demo_setup", stdout=out)
    path = tmp_path / "demo-ingest-token"
    raw = path.read_text().strip()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert f"ingest token saved to {path}" in out.getvalue()
    assert raw not in out.getvalue()
    team = Team.objects.get(slug="demo")
    assert IngestToken.objects.filter(team=team, revoked_at__isnull=True).count() == 1

    path.chmod(0o644)
    call_command("demo_setup", stdout=io.StringIO())
    assert path.read_text().strip() == raw
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert IngestToken.objects.filter(team=team).count() == 1


def test_the_demo_channel_reaches_the_demo_user_without_a_confirmation(
    db: None, settings: Any, tmp_path: Path
) -> None:
    settings.VAR_DIR = tmp_path
    call_command("demo_setup", stdout=io.StringIO())
    team = Team.objects.get(slug="demo")
    channel = Channel.objects.get(team=team, slug="demo-mail")
    statuses = channels_recipient_statuses(team=team, channels=[channel])[channel.pk]
    assert [(s.address, s.receives, s.by_membership) for s in statuses] == [
        ("demo@example.com", True, True)
    ]


def test_demo_setup_replaces_a_revoked_demo_token(db: None, settings: Any, tmp_path: Path) -> None:
    settings.VAR_DIR = tmp_path
    call_command("demo_setup", stdout=io.StringIO())
    path = tmp_path / "demo-ingest-token"
    old = path.read_text().strip()
    ingest_token_revoke(token=IngestToken.objects.get(team__slug="demo"))
    call_command("demo_setup", stdout=io.StringIO())
    new = path.read_text().strip()
    assert new != old
    assert IngestToken.objects.filter(team__slug="demo", revoked_at__isnull=True).count() == 1


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"team": "nope"}, "No team with the slug “nope”"),
        ({"pipeline": "nope"}, "Team acme has no pipeline with the slug “nope”"),
        ({"pipeline": "theirs"}, "Team acme has no pipeline with the slug “theirs”"),
        ({"token": None}, "--token is required for team acme"),
        ({"token": "lbi_not-a-real-token"}, "not an active ingest token of team acme"),
        ({"token": "theirs"}, "not an active ingest token of team acme"),
        ({"rps": 0}, "--rps must be more than 0"),
        ({"rps": -3}, "--rps must be more than 0"),
        ({"rps": 10_000}, "at most 5000"),
        ({"rps": "fast"}, "invalid float value"),
        ({"duration": 0}, "--duration must be a positive number"),
        ({"url": "ftp://example.com"}, "--url must be an http:// or https:// URL"),
        ({"url": "localhost:8000"}, "--url must be an http:// or https:// URL"),
        ({"retrieval_cache": 1.5}, "hit ratio is between 0 and 1"),
        ({"generation_speedup": 1.0}, "speed-up is at least 0 and under 1"),
    ],
)
def test_the_command_explains_bad_arguments(
    chat: tuple[Team, Pipeline, str], options: dict[str, Any], message: str
) -> None:
    other = make_team("globex")
    make_pipeline(other, "theirs")
    _token, their_raw = ingest_token_create(team=other, name="theirs", created_by=None)
    arguments: dict[str, Any] = {
        "team": "acme",
        "pipeline": "support",
        "token": chat[2],
        "url": "http://127.0.0.1:9",
        "wait": 0,
    }
    arguments.update(options)
    if arguments["token"] == "theirs":
        arguments["token"] = their_raw
    arguments = {key: value for key, value in arguments.items() if value is not None}
    if "rps" in arguments and isinstance(arguments["rps"], str):
        args = [f"--rps={arguments.pop('rps')}"]
    else:
        args = []
    with pytest.raises(CommandError, match=message):
        call_command("simulate_traffic", *args, stdout=io.StringIO(), **arguments)


def test_the_demo_team_without_a_saved_token_is_told_to_run_demo_setup(
    db: None, settings: Any, tmp_path: Path
) -> None:
    settings.VAR_DIR = tmp_path
    team = make_team("demo")
    make_pipeline(team, "rag-chat")
    with pytest.raises(CommandError, match=r"demo-ingest-token does not exist: run .*demo_setup"):
        simulate(team="demo", pipeline="rag-chat", url="http://127.0.0.1:9", wait=0)


def test_traces_arrive_as_raw_batches_on_a_live_server(
    live_server: Any, transactional_db: None
) -> None:
    team = make_team("acme")
    make_pipeline(team, "support", match_service="support-bot", match_root_span="POST /answer")
    token, raw = ingest_token_create(team=team, name="sim", created_by=None)
    output = simulate(
        team="acme", pipeline="support", rps=10, duration=1, url=live_server.url, token=raw
    )
    batches = list(RawBatch.objects.filter(team=team))
    assert batches
    assert {batch.token_id for batch in batches} == {token.pk}
    stored = sum(batch.span_count for batch in batches)
    assert f"{stored} spans exported; export failures: 0 (0 spans)" in output
    spans = [span for batch in batches for span in batch_spans(batch)]
    assert len(spans) == stored
    assert {row[6] for row in spans if row[2] is None} == {"support-bot"}  # root services


def test_ctrl_c_stops_the_command_and_sends_what_was_queued(
    chat: tuple[Team, Pipeline, str],
) -> None:
    _team, _pipeline, raw = chat
    # Interrupts land here until the command installs its own handler, and again after.
    previous = signal.signal(signal.SIGINT, lambda signum, frame: None)
    finished = threading.Event()

    def press_ctrl_c() -> None:
        while not finished.wait(0.4):
            os.kill(os.getpid(), signal.SIGINT)

    try:
        with receiver() as server:
            threading.Thread(target=press_ctrl_c, daemon=True).start()
            output = simulate(team="acme", pipeline="support", rps=20, url=server.url, token=raw)
            finished.set()
    finally:
        finished.set()
        signal.signal(signal.SIGINT, previous)
    sent = re.search(r"Sent (\d+) traces \((\d+) spans", output)
    assert sent
    assert int(sent[1]) > 0
    received = sum(
        len(scope.spans)
        for request in server.requests()
        for resource_spans in request.resource_spans
        for scope in resource_spans.scope_spans
    )
    assert received == int(sent[2])


def test_draining_gives_up_on_a_server_that_is_gone() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    exporter = CountingExporter(OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}/v1/traces"))
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    planner = TracePlanner(rng=random.Random(1), shape=TraceShape())
    emit_trace(tracer=provider.get_tracer("test"), plan=planner.plan(), start_ns=T0)
    began = time.monotonic()
    drain(provider=provider, exporter=exporter, timeout=0.5)
    assert time.monotonic() - began < 3  # the exporter alone would retry for 10 s
    assert exporter.exported_spans == 0
    assert exporter.failed_spans > 0


def _simulator_process(*arguments: str, log_path: Path) -> "subprocess.Popen[bytes]":
    with log_path.open("wb") as log:
        return subprocess.Popen(
            [sys.executable, "manage.py", "simulate_traffic", *arguments],
            cwd=ROOT, env=process_env(), stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_ends_the_command_with_every_span_sent_and_status_0(
    live_server: Any, transactional_db: None, tmp_path: Path, sig: signal.Signals
) -> None:
    """As honcho's SIGTERM or a terminal's Ctrl-C: the run ends, what was queued is sent
    to a server that is still up, and the command exits 0 without a traceback."""
    team = make_team("acme")
    make_pipeline(team, "support", match_service="support-bot", match_root_span="POST /answer")
    _token, raw = ingest_token_create(team=team, name="sim", created_by=None)
    log_path = tmp_path / "simulator.log"
    proc = _simulator_process(
        "--team", "acme", "--pipeline", "support", "--rps", "40", "--url", live_server.url,
        "--token", raw, log_path=log_path,
    )  # fmt: skip
    try:
        assert wait_for(lambda: "Sending 40 traces/s" in log_path.read_text(), timeout=60)
        time.sleep(1.5)  # spans queued and in flight
        proc.send_signal(sig)
        returncode = proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    output = log_path.read_text()
    assert returncode == 0, output
    assert "Traceback" not in output
    sent = re.search(r"(\d+) spans exported; export failures: 0 \(0 spans\)", output)
    assert sent, output
    stored = sum(batch.span_count for batch in RawBatch.objects.filter(team=team))
    assert stored == int(sent[1]) > 0


@pytest.mark.slow
def test_a_signal_while_waiting_for_the_server_ends_the_command_at_once(
    transactional_db: None, tmp_path: Path
) -> None:
    team = make_team("acme")
    make_pipeline(team, "support", match_service="support-bot", match_root_span="POST /answer")
    _token, raw = ingest_token_create(team=team, name="sim", created_by=None)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens there
    log_path = tmp_path / "simulator.log"
    proc = _simulator_process(
        "--team", "acme", "--pipeline", "support", "--url", f"http://127.0.0.1:{port}",
        "--token", raw, "--wait", "60", log_path=log_path,
    )  # fmt: skip
    try:
        assert wait_for(lambda: "Waiting for" in log_path.read_text(), timeout=60)
        began = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        returncode = proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    output = log_path.read_text()
    assert returncode == 0, output
    assert time.monotonic() - began < 3
    assert "Stopped before the server answered; nothing was sent." in output
    assert "Traceback" not in output


def test_the_answer_streams_in_chunks_from_the_engine_or_now_and_then_the_hosted_model() -> None:
    traces = emitted(300, profile=Profile(error_rate=0, outlier_rate=0))
    hosted = 0
    for spans in traces:
        [chat] = named(spans, "chat ")
        attributes = chat.attributes or {}
        assert chat.start_time is not None
        assert chat.end_time is not None
        chunks = [event.timestamp for event in chat.events if event.name == CHUNK_EVENT]
        assert chunks == sorted(chunks)
        assert len(chunks) >= 2
        assert chunks[-1] == pytest.approx(chat.end_time, abs=1_000)
        engines = named(spans, ENGINE_SPAN)
        if attributes["gen_ai.request.model"] == FALLBACK_MODEL:
            hosted += 1
            assert engines == []
            continue
        [engine] = engines
        assert engine.parent is not None
        assert engine.parent.span_id == chat.context.span_id
        assert engine.start_time is not None
        assert engine.end_time is not None
        assert chat.start_time < engine.start_time < engine.end_time < chat.end_time
        timings = engine.attributes or {}
        waited = float(timings["gen_ai.latency.time_in_queue"]) + float(  # type: ignore[arg-type]
            timings["gen_ai.latency.time_in_model_prefill"]  # type: ignore[arg-type]
        )
        engine_first = float(timings["gen_ai.latency.time_to_first_token"])  # type: ignore[arg-type]
        # The engine's first token comes before the client's: the network lies between.
        assert waited <= engine_first
        assert engine.start_time + engine_first * 1e9 < chunks[0]
    # About 6 % from the hosted fallback: 18 of 300, within 4 standard deviations.
    assert 0 < hosted < 36
