"""simulate_traffic over OTLP/gRPC (``--protocol grpc``): the official gRPC exporter into
the real gRPC server, in-process on a loopback port, beside the live HTTP server. The same
seeded traffic sent both ways into two teams leaves the same spans, traces, stage samples,
rollups and holdout behind; refusals are counted as export failures, as over HTTP."""

import contextlib
import io
import json
import random
import re
import socket
import threading
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from apps.analysis.models import ServedModel, StageSample
from apps.ingest.models import RawBatch, Span, Trace
from apps.ingest.otlp_grpc import OtlpGrpcServer, otlp_grpc_server
from apps.pipelines.models import Stage
from apps.rollups.models import (
    ALL_MODELS,
    E2E_STAGE_ID,
    UNTRACKED_STAGE_ID,
    LlmBucket,
    RollupBucket,
)
from apps.rollups.sketches.ddsketch import Sketch
from apps.teams.models import IngestToken, Team
from apps.teams.services import ingest_token_create, ingest_token_revoke, metrics_token_create
from tests.builders.configuration import make_team
from tests.builders.demo_traffic import rag_pipeline
from tests.demo.scaled_demo import SPEED, scaled_demo_pipeline
from tests.ingest.test_otlp_grpc_process import self_signed
from tests.processes import free_port, wait_for
from tests.sdk_sender import workers_settle

SEED = 3  # two of its first twenty requests fail
# Twenty traces: the last is due at 0.95 s, 25 ms before the run ends, so both runs send
# all twenty whatever the scheduler's jitter.
RPS, DURATION_S, TRACES = 20, 0.975, 20
# Five, for the tests that only need some.
SHORT_S, SHORT_TRACES = 0.225, 5
SENT = re.compile(r"Sent (\d+) traces \((\d+) spans, (\d+) with errors\)")
EXPORTED = re.compile(r"(\d+) spans exported; export failures: (\d+) \((\d+) spans\)")


def start_grpc(port: int = 0) -> OtlpGrpcServer:
    server = otlp_grpc_server(address=f"127.0.0.1:{port}", threads=4, max_concurrent=16)
    server.start()
    return server


@pytest.fixture
def grpc_port() -> Iterator[int]:
    server = start_grpc()
    try:
        yield server.port
    finally:
        server.stop(None)


@dataclass
class Sender:
    team: Team
    token: IngestToken
    ingest: str
    metrics: str


def sender(slug: str, *, client: bool = False) -> Sender:
    """A team with the demo's pipeline (``rag-chat``): stages by span rules for the planned
    traces, or named by the client's spans in client mode; its tokens."""
    team = make_team(slug)
    if client:
        scaled_demo_pipeline(team)
    else:
        rag_pipeline(team)
    token, ingest = ingest_token_create(team=team, name="sim", created_by=None)
    _reader, metrics = metrics_token_create(team=team, name="sim", created_by=None)
    return Sender(team, token, ingest, metrics)


def simulate(*args: str, **options: Any) -> str:
    out = io.StringIO()
    call_command("simulate_traffic", *args, stdout=out, **options)
    return out.getvalue()


def summary(output: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(traces, spans, with errors) sent, and (spans exported, failed batches, failed spans)."""
    sent, exported = SENT.search(output), EXPORTED.search(output)
    assert sent, output
    assert exported, output
    return tuple(map(int, sent.groups())), tuple(map(int, exported.groups()))


# ---------------------------------------------------------------- what a path stored


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def stored_spans(team: Team) -> list[tuple[Any, ...]]:
    """Each trace as its spans, with times from the trace's start and parents by name:
    what two runs of the same seed share (ids and clock times are their own)."""
    origin = dict(Trace.objects.filter(team=team).values_list("pk", "start_ns"))
    spans = list(Span.objects.filter(team_id=team.pk))
    names = {(span.trace_pk, bytes(span.span_id)): span.name for span in spans}
    traces: dict[int, list[tuple[Any, ...]]] = defaultdict(list)
    for span in spans:
        zero = origin[span.trace_pk]
        assert zero is not None  # every trace has its root
        parent = span.parent_span_id
        events = [{**event, "time_ns": event["time_ns"] - zero} for event in span.events]
        traces[span.trace_pk].append(
            (
                span.name, span.service, span.kind, span.status, span.status_message,
                span.scope_name, span.start_ns - zero, span.end_ns - span.start_ns,
                names[(span.trace_pk, bytes(parent))] if parent else "",
                canonical(span.attributes), canonical(events),
            )
        )  # fmt: skip
    return sorted(tuple(sorted(trace)) for trace in traces.values())


def stored_traces(team: Team) -> list[tuple[Any, ...]]:
    return sorted(
        (
            trace.root_name, trace.root_service, trace.pipeline.slug if trace.pipeline else "",
            trace.state, trace.span_count, trace.spans_dropped, trace.error, trace.incomplete,
            (trace.end_ns or 0) - (trace.start_ns or 0), trace.untracked_critical_ns,
        )
        for trace in Trace.objects.filter(team=team).select_related("pipeline")
    )  # fmt: skip


def stage_names(team: Team) -> dict[int, str]:
    names = dict(Stage.objects.filter(pipeline__team=team).values_list("pk", "slug"))
    return {**names, E2E_STAGE_ID: "end to end", UNTRACKED_STAGE_ID: "untracked"}


def model_names(team: Team) -> dict[int | None, str]:
    models = ServedModel.objects.filter(team_id=team.pk)
    return {None: "", ALL_MODELS: "all", **{model.pk: model.label for model in models}}


def stored_samples(team: Team) -> list[tuple[Any, ...]]:
    stages, models = stage_names(team), model_names(team)
    return sorted(
        (
            stages[s.stage_id], s.wall_ns, s.critical_ns, s.span_count, s.error, s.holdout,
            models[s.model_id], s.output_tokens or 0, s.generation_ns or 0, s.max_gap_ns or 0,
        )
        for s in StageSample.objects.filter(team_id=team.pk)
    )  # fmt: skip


def per_stage(samples: list[tuple[Any, ...]]) -> dict[str, tuple[int, int, int, int]]:
    """Per stage: samples, summed wall and critical ns, held-out samples."""
    figures: dict[str, tuple[int, int, int, int]] = {}
    for stage, wall, critical, _spans, _error, holdout, *_llm in samples:
        count, walls, criticals, held = figures.get(stage, (0, 0, 0, 0))
        figures[stage] = (count + 1, walls + wall, criticals + critical, held + holdout)
    return figures


def stored_rollups(team: Team) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    """Per stage, model, measure and resolution, over all buckets (the runs fall on
    different clock buckets): counts, sums, the maximum and the merged sketch's p50, p95
    and p99."""
    stages, models = stage_names(team), model_names(team)
    groups: dict[tuple[Any, ...], list[Any]] = defaultdict(list)
    for bucket in RollupBucket.objects.filter(team_id=team.pk):
        groups[(stages[bucket.stage_id], "", bucket.measure, bucket.resolution)].append(bucket)
    for llm in LlmBucket.objects.filter(team_id=team.pk):
        key = (stages[llm.stage_id], models[llm.model_id], llm.measure, llm.resolution)
        groups[key].append(llm)
    totals = {}
    for key, buckets in groups.items():
        sketch = Sketch.merged(Sketch.from_bytes(bytes(bucket.sketch)) for bucket in buckets)
        totals[key] = (
            sum(bucket.count for bucket in buckets),
            sum(bucket.error_count for bucket in buckets),
            sum(getattr(bucket, "good_count", 0) for bucket in buckets),
            sum(bucket.sum_ns for bucket in buckets),
            max(bucket.max_ns for bucket in buckets),
            tuple(sketch.quantiles([0.5, 0.95, 0.99])),
        )
    return totals


# ---------------------------------------------------------------- the same traffic both ways


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("clean_cache")
def test_the_same_seeded_traffic_over_grpc_stores_what_it_stores_over_http(
    live_server: Any, grpc_port: int, settings: Any
) -> None:
    over_http, over_grpc = sender("over-http"), sender("over-grpc")
    common = {"pipeline": "rag-chat", "rps": RPS, "duration": DURATION_S, "seed": SEED}
    http_output = simulate(team="over-http", url=live_server.url, token=over_http.ingest, **common)
    # Without --grpc-endpoint: where serve_otlp_grpc listens by its settings.
    settings.OTLP_GRPC_HOST, settings.OTLP_GRPC_PORT = "127.0.0.1", grpc_port
    grpc_output = simulate(
        "--protocol", "grpc", team="over-grpc", url="http://127.0.0.1:9", token=over_grpc.ingest,
        **common,
    )  # fmt: skip
    assert f"over OTLP/HTTP (for {DURATION_S:g} s)" in http_output
    assert f"to 127.0.0.1:{grpc_port} over OTLP/gRPC (for {DURATION_S:g} s)" in grpc_output
    sent, exported = summary(http_output)
    assert summary(grpc_output) == (sent, exported)
    assert sent[0] == TRACES
    assert sent[2] > 0  # failing requests too
    assert exported == (sent[1], 0, 0)
    workers_settle()

    spans = stored_spans(over_http.team)
    assert len(spans) == TRACES
    assert sum(len(trace) for trace in spans) == sent[1]
    assert stored_spans(over_grpc.team) == spans
    traces = stored_traces(over_http.team)
    assert {trace[2] for trace in traces} == {"rag-chat"}  # every trace in the pipeline
    assert stored_traces(over_grpc.team) == traces
    samples = stored_samples(over_http.team)
    assert per_stage(samples)["rerank"][0] > 0
    assert stored_samples(over_grpc.team) == samples
    assert per_stage(stored_samples(over_grpc.team)) == per_stage(samples)
    rollups = stored_rollups(over_http.team)
    assert rollups[("end to end", "", 1, 60)][0] == TRACES
    assert stored_rollups(over_grpc.team) == rollups


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("clean_cache")
def test_the_client_mode_holds_out_the_same_requests_over_grpc_as_over_http(
    live_server: Any, grpc_port: int, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runtime client's holdout: requests run without levers, whose spans carry
    ``latency_budget.holdout``. The server marks their stage samples whichever way the
    spans came, so the held-out share it stores is the one the client drew."""
    settings.RUNTIME_DOCUMENT_CACHE_SECONDS = 0
    settings.RUNTIME_HOLDOUT_PERCENT = 50
    over_http, over_grpc = sender("over-http", client=True), sender("over-grpc", client=True)
    runs = {}
    for path, team in (("http/protobuf", over_http), ("grpc", over_grpc)):
        # The client draws the holdout from the process's random numbers: the same draws
        # for both runs, so that they hold out the same requests.
        monkeypatch.setattr("latency_budgets.request.random", random.Random(SEED))
        grpc = ["--grpc-endpoint", f"127.0.0.1:{grpc_port}"] if path == "grpc" else []
        # Twenty requests: the last is due at 0.95 s, 25 ms before the run ends.
        output = simulate(
            "--protocol", path, *grpc, team=team.team.slug, pipeline="rag-chat", mode="client",
            rps=20, duration=0.975, speed=SPEED, seed=SEED, url=live_server.url,
            token=team.ingest, metrics_token=team.metrics,
        )  # fmt: skip
        served = re.search(r"Served (\d+) requests", output)
        held = re.search(r"Run without levers \(the holdout\): (\d+) requests", output)
        assert served, output
        assert held, output
        assert "export failures: 0 (0 spans)" in output
        runs[path] = (int(served[1]), int(held[1]))
    assert runs["grpc"] == runs["http/protobuf"]
    requests, holdout = runs["grpc"]
    assert requests == 20
    assert 0 < holdout < requests
    workers_settle()

    for team in (over_http, over_grpc):
        samples = StageSample.objects.filter(team_id=team.team.pk)
        assert Trace.objects.filter(team=team.team, pipeline__isnull=False).count() == requests
        held_out = samples.filter(holdout=True).values("trace_pk").distinct().count()
        assert held_out == holdout
    held_by_stage = [
        {stage: figures[3] for stage, figures in per_stage(stored_samples(t.team)).items()}
        for t in (over_http, over_grpc)
    ]
    assert held_by_stage[0] == held_by_stage[1]
    assert held_by_stage[0]["retrieval"] == holdout


# ---------------------------------------------------------------- refusals and options


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("clean_cache")
def test_a_token_the_grpc_server_refuses_is_counted_as_export_failures() -> None:
    """The command checks the token before it starts; revoked while the command waits
    for the gRPC port, it is refused by the server (UNAUTHENTICATED): the run goes on and
    its summary counts every span as failed."""
    acme = sender("acme")
    port = free_port()
    out = io.StringIO()
    started: list[OtlpGrpcServer] = []

    def revoke_then_serve() -> None:
        try:
            assert wait_for(lambda: "(OTLP/gRPC) …" in out.getvalue(), timeout=30)
            ingest_token_revoke(token=acme.token)
        finally:
            connection.close()
        started.append(start_grpc(port))

    thread = threading.Thread(target=revoke_then_serve)
    thread.start()
    try:
        call_command(
            "simulate_traffic", "--protocol", "grpc", "--grpc-endpoint", f"127.0.0.1:{port}",
            team="acme", pipeline="rag-chat", rps=RPS, duration=SHORT_S, url="http://127.0.0.1:9",
            token=acme.ingest, wait=30, stdout=out,
        )  # fmt: skip
    finally:
        thread.join()
        for server in started:
            server.stop(None)
    (traces, spans, _errors), exported = summary(out.getvalue())
    assert traces == SHORT_TRACES
    assert exported[0] == 0
    assert exported[1] >= 1
    assert exported[2] == spans
    assert not RawBatch.objects.filter(team=acme.team).exists()


@dataclass
class Relay:
    port: int
    sent: int = 0


@contextmanager
def relay(to_port: int) -> Iterator[Relay]:
    """A TCP relay in front of the gRPC port, counting the bytes the client sends."""
    listener = socket.create_server(("127.0.0.1", 0))
    state = Relay(listener.getsockname()[1])
    lock = threading.Lock()

    def pipe(source: socket.socket, target: socket.socket, counted: bool) -> None:
        try:
            while data := source.recv(65536):
                if counted:
                    with lock:
                        state.sent += len(data)
                target.sendall(data)
        except OSError:  # the other direction ended the connection
            pass
        finally:
            # Ends the other direction too; each direction closes the socket it reads.
            for end in (source, target):
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)
            source.close()

    def accept() -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:  # closed
                return
            server = socket.create_connection(("127.0.0.1", to_port))
            for source, target, counted in ((client, server, True), (server, client, False)):
                threading.Thread(target=pipe, args=(source, target, counted), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield state
    finally:
        listener.close()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("clean_cache")
def test_gzip_compresses_the_grpc_calls(grpc_port: int) -> None:
    acme = sender("acme")
    sent = {}
    for gzip in (False, True):
        with relay(grpc_port) as counted:
            output = simulate(
                "--protocol", "grpc", "--grpc-endpoint", f"127.0.0.1:{counted.port}",
                team="acme", pipeline="rag-chat", rps=RPS, duration=SHORT_S, seed=SEED,
                url="http://127.0.0.1:9", token=acme.ingest, gzip=gzip,
            )  # fmt: skip
        (traces, spans, _errors), exported = summary(output)
        assert (traces, exported) == (SHORT_TRACES, (spans, 0, 0))
        sent[gzip] = counted.sent
    assert sent[True] < sent[False] / 2
    assert sum(batch.span_count for batch in RawBatch.objects.filter(team=acme.team)) == 2 * spans


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("clean_cache")
def test_an_https_endpoint_sends_over_tls(
    tmp_path: Path, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key = self_signed(tmp_path)
    settings.OTLP_GRPC_TLS_CERT_FILE, settings.OTLP_GRPC_TLS_KEY_FILE = str(cert), str(key)
    # The exporter trusts the certificate the OpenTelemetry variable names.
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_CERTIFICATE", str(cert))
    acme = sender("acme")
    server = start_grpc()
    try:
        output = simulate(
            "--protocol", "grpc", "--grpc-endpoint", f"https://127.0.0.1:{server.port}",
            team="acme", pipeline="rag-chat", rps=RPS, duration=SHORT_S, url="http://127.0.0.1:9",
            token=acme.ingest,
        )  # fmt: skip
    finally:
        server.stop(None)
    (traces, spans, _errors), exported = summary(output)
    assert (traces, exported) == (SHORT_TRACES, (spans, 0, 0))
    assert sum(batch.span_count for batch in RawBatch.objects.filter(team=acme.team)) == spans


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--protocol", "http/json"], r"--protocol: invalid choice: 'http/json'"),
        (["--protocol", "GRPC"], r"--protocol: invalid choice: 'GRPC' \(choose from"),
        (["--grpc-endpoint", "127.0.0.1:4317"], "--grpc-endpoint: only with --protocol grpc"),
        (["--protocol", "grpc", "--grpc-endpoint", "localhost"], "must be host:port"),
        (["--protocol", "grpc", "--grpc-endpoint", "h:99999"], "must be host:port"),
        (["--protocol", "grpc", "--grpc-endpoint", "grpc://h:1"], "must be host:port"),
        (["--protocol", "grpc", "--grpc-endpoint", "h:1/v1/traces"], "must be host:port"),
    ],
)
def test_the_protocol_options_explain_bad_values(db: None, args: list[str], message: str) -> None:
    acme = sender("acme")
    with pytest.raises(CommandError, match=message):
        simulate(
            *args, team="acme", pipeline="rag-chat", url="http://127.0.0.1:9", token=acme.ingest,
            wait=0,
        )  # fmt: skip


def test_the_command_gives_up_when_no_grpc_server_answers(db: None) -> None:
    acme = sender("acme")
    port = free_port()
    with pytest.raises(
        CommandError, match=rf"No server answered at 127.0.0.1:{port} \(OTLP/gRPC\) within 1 s"
    ):
        simulate(
            "--protocol", "grpc", "--grpc-endpoint", f"127.0.0.1:{port}", team="acme",
            pipeline="rag-chat", url="http://127.0.0.1:9", token=acme.ingest, wait=1,
        )  # fmt: skip
