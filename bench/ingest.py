"""Ingestion throughput, accept latency and end-to-end freshness on PostgreSQL and Redis,
spans kept in PostgreSQL or, with ``BENCH_SPAN_STORE_URL``, in ClickHouse.

Starts one gunicorn web process (one worker process with four threads, so a request
waiting on the database does not hold the next) and, for the end-to-end phase, one
Celery worker (two pool processes, with the scheduler) against a fresh test
database, then sends pre-encoded 512-span OTLP batches from this process over
HTTP keep-alive. Figures:

- accept: spans/s one web process accepts from one connection sending back to back,
  and per-request latency, for protobuf and OTLP JSON (no worker running, so the
  request path is measured alone), and the same protobuf bodies over OTLP/gRPC to one
  ``serve_otlp_grpc`` process with as many threads as the web process;
- end to end: spans/s carried from HTTP to finalized stage samples while sending
  ``BENCH_DURATION`` seconds (default 120) of protobuf at ``BENCH_RATE`` spans/s
  (default 30,000, the goal) and of OTLP JSON at ``BENCH_RATE_JSON`` (default
  15,000): sustained (spans reaching their stage samples per second while the load
  runs, after a warm-up) and over the whole run including the wait for the last
  traces to go idle; the backlog over time (bounded when the worker keeps up), and
  how long after going idle each trace was finalized. The protobuf load runs twice, over
  HTTP and over gRPC; in the gRPC column the ``web`` CPU is the gRPC server process's.

Every body carries current times, as real exporters' batches do, so stage samples
spread over the rollup buckets as the run goes on.

``BENCH_SPAN_STORE_URL`` (a ``SPAN_STORE_URL``; unset: PostgreSQL) is the span store of
every process, this one's included; ClickHouse's servers and ZooKeeper then count in
the CPU per span, each in a column of its own. Each end-to-end phase also reports the
WAL and the bytes it stored per span (``bench.ingest_storage``), and how busy the whole
machine was beside the processes measured.
"""

import cProfile
import http.client
import io
import os
import pstats
import random
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
from django.conf import settings
from django.db import connection
from django.db.models import Max, Sum
from django.test.utils import override_settings, setup_test_environment
from django.utils import timezone

from apps.core.time import NS_PER_S, NS_PER_US
from bench.cpu import ClickHouseCpuMeter, CpuMeter, DatabaseBackends, machine_busy_s
from bench.decode import to_otlp_json, to_protobuf, trace_spans
from bench.ingest_storage import StorageMeter, span_store_prepare
from bench.report import percentile, print_rows, write
from tests.processes import free_port, running

TRACES_PER_BATCH = 64  # 8 spans each: 512 spans per request
ACCEPT_REQUESTS = int(os.environ.get("BENCH_ACCEPT_REQUESTS", "300"))
DURATION_S = float(os.environ.get("BENCH_DURATION", "120"))
# Offered load of the end-to-end phase, spans per second.
RATE = float(os.environ.get("BENCH_RATE", "30000"))
RATE_JSON = float(os.environ.get("BENCH_RATE_JSON", "15000"))
IDLE_S = 2.0
# The first seconds of the end-to-end phase (processes warming up) are not counted as sustained.
WARMUP_S = 10.0
# Concurrent client connections in the end-to-end phase (the web process has as many threads).
CONNECTIONS = 4
# Pool processes of the one Celery worker (Celery's default is one per core).
WORKER_CONCURRENCY = int(os.environ.get("BENCH_WORKER_CONCURRENCY", "2"))
# Where spans are kept: a SPAN_STORE_URL (ClickHouse), or PostgreSQL when empty.
SPAN_STORE_URL = os.environ.get("BENCH_SPAN_STORE_URL", "")


def _batches(count: int, encode: Any, rng: random.Random) -> list[bytes]:
    """Fresh trace ids and current times for every batch, so each trace is new."""
    now = time.time_ns()
    bodies = []
    for _ in range(count):
        spans = [
            span
            for t in range(TRACES_PER_BATCH)
            for span in trace_spans(rng, now - 3 * NS_PER_S + t * NS_PER_US)
        ]
        bodies.append(encode(spans))
    return bodies


class FreshBodies:
    """Encoded batches whose trace ids and times are replaced before every send.

    Encoding spans in Python would make the sender, not the server, the bottleneck:
    each template remembers where its trace ids sit (16 bytes, or 32 hex digits in
    JSON) and where its times sit (8-byte little-endian integers, or 19 decimal
    digits in JSON), and a fresh body is a copy with new ids and times written over
    them. Fresh times matter as much as fresh ids: like real traffic, each body's
    traces start about three seconds before it is sent, so stage samples spread over
    the rollup buckets as time passes instead of piling into one.
    """

    def __init__(self, rng: random.Random, encode: Any = None, templates: int = 20) -> None:
        self.rng = rng
        self.hex = encode is to_otlp_json
        encode = encode or to_protobuf
        self.templates: list[tuple[bytes, list[list[int]], _Times]] = []
        self.made_ns = time.time_ns()
        for _ in range(templates):
            traces = [
                trace_spans(rng, self.made_ns - 3 * NS_PER_S) for _ in range(TRACES_PER_BATCH)
            ]
            spans = [s for t in traces for s in t]
            body = encode(spans)
            places = [_offsets(body, self._id(trace[0]["trace_id"])) for trace in traces]
            self.templates.append((body, places, _Times(body, spans, decimal=self.hex)))

    def _id(self, trace_id: bytes) -> bytes:
        return trace_id.hex().encode() if self.hex else trace_id

    def next(self) -> bytes:
        body, places, times = self.templates[self.rng.randrange(len(self.templates))]
        fresh = bytearray(body)
        times.shift(fresh, time.time_ns() - self.made_ns)
        for offsets in places:
            new_id = self._id(self.rng.randbytes(16))
            for offset in offsets:
                fresh[offset : offset + len(new_id)] = new_id
        return bytes(fresh)


class _Times:
    """Where a template's span and event times sit, to move them all by one delta at once."""

    def __init__(self, body: bytes, spans: list[dict[str, Any]], *, decimal: bool) -> None:
        self.decimal = decimal
        self.width = 19 if decimal else 8
        values = {s["start"] for s in spans} | {s["end"] for s in spans}
        values |= {at for s in spans for _, at in s["events"]}
        offsets, originals = [], []
        for value in sorted(values):
            found = _offsets(body, self._bytes(value))
            offsets += found
            originals += [value] * len(found)
        self.originals = np.array(originals, dtype=np.uint64)
        self.index = np.array(offsets, dtype=np.int64)[:, None] + np.arange(self.width)

    def _bytes(self, value: int) -> bytes:
        return str(value).encode() if self.decimal else value.to_bytes(8, "little")

    def shift(self, body: bytearray, delta_ns: int) -> None:
        values = self.originals + np.uint64(delta_ns)
        if self.decimal:
            powers = np.uint64(10) ** np.arange(self.width - 1, -1, -1, dtype=np.uint64)
            encoded = ((values[:, None] // powers) % np.uint64(10) + np.uint64(48)).astype(np.uint8)
        else:
            encoded = values.astype("<u8").view(np.uint8).reshape(-1, 8)
        np.frombuffer(body, dtype=np.uint8)[self.index] = encoded


def _offsets(body: bytes, needle: bytes) -> list[int]:
    found, start = [], body.find(needle)
    while start >= 0:
        found.append(start)
        start = body.find(needle, start + len(needle))
    return found


def _env(extra: dict[str, str]) -> dict[str, str]:
    from tests.processes import process_env

    return process_env(
        TRACE_IDLE_SECONDS=str(IDLE_S),
        TRACE_SETTLE_SECONDS=str(IDLE_S),
        # Capacity is measured, not the limits that protect accounts from each other.
        INGEST_RATE_LIMIT_SPANS="0",
        INGEST_MAX_BYTES_PER_ACCOUNT_PER_DAY="0",
        SPAN_STORE_URL=SPAN_STORE_URL,
        **extra,
    )


def _process(args: list[str], log: Path, env: dict[str, str]) -> Any:
    return running(args, log_path=log, env=env, stop_timeout=30)


def _wait_http(port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/healthz")
            if conn.getresponse().status == 200:
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("the web process did not start")


class Sender:
    def __init__(self, port: int, token: str, content_type: str) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": content_type}

    def send(self, body: bytes) -> tuple[int, float]:
        start = time.perf_counter()
        self.conn.request("POST", "/v1/traces", body=body, headers=self.headers)
        response = self.conn.getresponse()
        response.read()
        return response.status, (time.perf_counter() - start) * 1000


EXPORT_METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


class GrpcSender:
    """The same protobuf bodies as ``Sender``, as ExportTraceServiceRequest messages (the
    HTTP body is that message's encoding) on one channel; statuses read as HTTP's."""

    def __init__(self, port: int, token: str) -> None:
        import grpc

        self.grpc = grpc
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        self.export = self.channel.unary_unary(EXPORT_METHOD)  # bytes in, bytes out
        self.metadata = (("authorization", f"Bearer {token}"),)

    def send(self, body: bytes) -> tuple[int, float]:
        start = time.perf_counter()
        try:
            self.export(body, metadata=self.metadata, timeout=30)
            status = 200
        except self.grpc.RpcError as error:
            code = error.code()
            refused = (self.grpc.StatusCode.RESOURCE_EXHAUSTED, self.grpc.StatusCode.UNAVAILABLE)
            status = 503 if code in refused else 500
        return status, (time.perf_counter() - start) * 1000


def _wait_grpc(port: int, timeout: float = 30) -> None:
    import grpc

    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        grpc.channel_ready_future(channel).result(timeout=timeout)


class OpenLoad:
    """Requests at a fixed span rate over several keep-alive connections (one per thread).

    Several connections keep the web process busy while one request waits on the
    database; refused requests (503 with a deep backlog) are counted and not retried.
    """

    def __init__(self, connect: Any, bodies: FreshBodies, rate: float) -> None:
        self.connect = connect  # a new sender (one connection) per thread
        self.bodies, self.rate = bodies, rate
        self.lock = threading.Lock()
        self.issued = self.sent = self.refused = 0

    def run(self, start: float) -> None:
        sender = self.connect()
        while (elapsed := time.monotonic() - start) < DURATION_S:
            with self.lock:
                due = self.issued <= self.rate * elapsed
                if due:
                    self.issued += TRACES_PER_BATCH * 8
                    body = self.bodies.next()
            if not due:
                time.sleep(0.002)
                continue
            status, _ = sender.send(body)
            with self.lock:
                if status == 200:
                    self.sent += TRACES_PER_BATCH * 8
                else:
                    self.refused += 1
            if status != 200:
                time.sleep(0.1)


def _setup() -> tuple[str, int]:
    from apps.teams.services import ingest_token_create
    from tests.builders.configuration import (
        make_pipeline,
        make_rule,
        make_stage,
        make_team,
        make_user,
    )

    team = make_team("bench", owner=make_user("bench"))
    pipeline = make_pipeline(
        team, "rag-chat", match_service="chat-api", match_root_span="POST /v1/chat",
        budget={"p95": 2500},
    )  # fmt: skip
    rules: list[tuple[str, dict[str, Any]]] = [
        ("auth", {"span_name": "auth"}),
        ("embedding", {"attributes": {"gen_ai.operation.name": "embeddings"}}),
        ("retrieval", {"attributes": {"openinference.span.kind": "RETRIEVER"}}),
        ("rerank", {"attributes": {"openinference.span.kind": "RERANKER"}}),
        ("tools", {"attributes": {"gen_ai.operation.name": "execute_tool"}}),
        ("ttft", {"attributes": {"gen_ai.operation.name": "chat"}, "portion": "until_first_token"}),
        ("generation", {"attributes": {"gen_ai.operation.name": "chat"},
                        "portion": "after_first_token"}),
    ]  # fmt: skip
    for slug, rule in rules:
        make_rule(make_stage(pipeline, slug, budget_ms=500), **rule)
    _, raw = ingest_token_create(team=team, name="bench", created_by=None)
    return raw, pipeline.pk


def _accept_phase(sender: Any, bodies: list[bytes]) -> dict:
    for body in bodies[:10]:
        sender.send(body)  # warm up
    latencies = []
    start = time.perf_counter()
    for body in bodies[10:]:
        status, ms = sender.send(body)
        assert status == 200, status
        latencies.append(ms)
    elapsed = time.perf_counter() - start
    return {
        "requests": len(latencies),
        "spans_per_s": round(len(latencies) * 512 / elapsed),
        "p50_ms": round(percentile(latencies, 50), 2),
        "p95_ms": round(percentile(latencies, 95), 2),
        "max_ms": round(max(latencies), 2),
        "body_kb": round(len(bodies[-1]) / 1024, 1),
    }


def _backlog() -> int:
    from apps.ingest.models import RawBatch

    return int(RawBatch.objects.aggregate(total=Sum("span_count"))["total"] or 0)


def _spans_stored() -> int:
    """Spans stored, as their traces count them: the span table stays empty when spans
    are kept in ClickHouse."""
    from apps.ingest.models import Trace

    return int(Trace.objects.aggregate(total=Sum("span_count"))["total"] or 0)


def _end_to_end(
    connect: Any,
    logs: Path,
    rng: random.Random,
    *,
    web_pid: int,
    json: bool = False,
    rate: float,
) -> dict:
    from apps.analysis.models import StageSample
    from apps.ingest.models import ANALYZED_STATES, RawBatch, Span, Trace, TraceState

    tables = ", ".join(model._meta.db_table for model in (Span, Trace, RawBatch, StageSample))
    with connection.cursor() as cursor:  # each phase starts empty
        cursor.execute(f"TRUNCATE {tables}")
    span_store_prepare(SPAN_STORE_URL)
    storage = StorageMeter(SPAN_STORE_URL)
    storage.start()
    encode = to_otlp_json if json else to_protobuf
    worker_env = _env({})
    worker = [
        sys.executable, "-m", "celery", "-A", "budgets_site", "worker", "-B",
        "-Q", "ingest,rollup,alerts,whatif", "--concurrency", str(WORKER_CONCURRENCY),
        "--loglevel", "WARNING", "--schedule", str(logs / "beat-schedule"),
        "--without-gossip", "--without-mingle",
    ]  # fmt: skip
    with _process(worker, logs / "worker.log", worker_env) as worker_proc:
        meter_of = ClickHouseCpuMeter if SPAN_STORE_URL else CpuMeter
        meter = meter_of(web=web_pid, worker=worker_proc.pid)
        cpu_from = None
        machine_from = 0.0
        own_backends = DatabaseBackends(connection.settings_dict["NAME"])
        # Open loop at ``rate`` spans/s: the backlog shows whether the worker keeps up.
        load = OpenLoad(connect, FreshBodies(rng, encode), rate)
        start = time.monotonic()
        steady_from = timezone.now() + timedelta(seconds=WARMUP_S)
        threads = [threading.Thread(target=load.run, args=(start,)) for _ in range(CONNECTIONS)]
        for thread in threads:
            thread.start()
        backlog_series: list[int] = []
        while time.monotonic() - start < DURATION_S:
            if cpu_from is None and timezone.now() >= steady_from:
                cpu_from = meter.snapshot()
                machine_from = machine_busy_s()
                own_backends.start()
                steady_from = timezone.now()
            backlog_series.append(_backlog())
            storage.tick()
            # Wake at the end of the warm-up for the first CPU reading, then every 5 s.
            until_steady = (steady_from - timezone.now()).total_seconds()
            time.sleep(5.0 if cpu_from else min(5.0, max(0.05, until_steady)))
        for thread in threads:
            thread.join()
        cpu = CpuMeter.spent(cpu_from, meter.snapshot()) if cpu_from else {}
        machine_busy = machine_busy_s() - machine_from
        own_backends_s = own_backends.spent() if cpu_from else 0.0
        load_average = os.getloadavg()
        sent, refused = load.sent, load.refused
        max_backlog = max(backlog_series)
        send_elapsed = time.monotonic() - start
        steady_until = timezone.now()
        stored_during_send = _spans_stored()
        # Let the worker finish: everything stored and every trace finalized.
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if not _backlog() and not Trace.objects.filter(state=TraceState.OPEN).exists():
                break
            storage.tick()
            time.sleep(0.5)
        total_elapsed = time.monotonic() - start
    stored = _spans_stored()
    # Settle and idle times are both IDLE_S: a trace is analyzed and finalized in one step.
    traces = Trace.objects.filter(state__in=ANALYZED_STATES)
    delays = [
        (t.finalized_at - t.last_span_at - timedelta(seconds=IDLE_S)).total_seconds()
        for t in traces.only("finalized_at", "last_span_at")
        if t.finalized_at is not None
    ]
    # The rate spans reach their stage samples while the load runs, past the warm-up:
    # the sustained throughput, with neither the start nor the wait after the last
    # request (the idle time every trace needs) in it.
    steady = traces.filter(finalized_at__gte=steady_from, finalized_at__lt=steady_until)
    steady_spans = steady.aggregate(total=Sum("span_count"))["total"] or 0
    steady_s = (steady_until - steady_from).total_seconds()
    cpu_total = sum(cpu.values())
    return {
        "spans_sent": sent,
        "requests_refused": refused,
        "send_s": round(send_elapsed, 1),
        "accepted_spans_per_s": round(sent / send_elapsed),
        "stored_while_sending": stored_during_send,
        "sustained_spans_per_s": round(steady_spans / steady_s) if steady_s > 0 else None,
        "end_to_end_spans_per_s": round(stored / total_elapsed),
        "drained_after_s": round(total_elapsed - send_elapsed, 1),
        # CPU of the web process, the worker and their PostgreSQL backends over the
        # sustained window, per span that reached its stage samples in that window.
        "cpu_cores_busy": round(cpu_total / steady_s, 2) if steady_s > 0 else None,
        # Every core's busy time over the same window: what ran beside the measured
        # processes is the difference (the machine is shared).
        "machine_cores_busy": round(machine_busy / steady_s, 2) if steady_s > 0 else None,
        "load_average_1m": round(load_average[0], 2),
        "cpu_us_per_span": round(cpu_total / steady_spans * 1e6, 1) if steady_spans else None,
        **{
            f"cpu_us_per_span_{name}": round(value / steady_spans * 1e6, 1)
            for name, value in cpu.items()
            if steady_spans
        },
        # Of the postgres column, the backends of the bench's database alone (a lower
        # bound, not in the total): the server is shared with other databases.
        "postgres_own_backends_us_per_span": (
            round(own_backends_s / steady_spans * 1e6, 1) if steady_spans else None
        ),
        "max_backlog_spans": max_backlog,
        "backlog_last_minute_max": max(backlog_series[-12:] or [0]),
        "traces_finalized": len(delays),
        "finalize_delay_p50_s": round(percentile(delays, 50), 2) if delays else None,
        "finalize_delay_p95_s": round(percentile(delays, 95), 2) if delays else None,
        "last_finalized": str(traces.aggregate(last=Max("finalized_at"))["last"]),
        **storage.figures(stored),
    }


# The drain's and finalization's steps, whichever store writes: their cumulative time
# says which one a worker that falls behind waits on (the ClickHouse server's time shows
# as the driver waiting for its answer).
PROFILED_STEPS = {
    "raw_batches_drain", "span_rows_decode", "spans_write", "span_rows_store",
    "_traces_lock", "_taken", "_stored", "_batches_sent", "_traces_create", "_insert",
    "_traces_update",
    "traces_finalize_due", "spans_of_traces", "spans_projected",
}  # fmt: skip


def _profile(token: str, rng: random.Random) -> str:
    """Where the worker's time goes: drain and finalize in process, cProfile'd."""
    from apps.analysis.services.finalize import traces_finalize_due
    from apps.ingest.decoding import decode_otlp_protobuf
    from apps.ingest.services.batches import accepted_batch_store, raw_batches_drain
    from apps.teams.models import Team

    team = Team.objects.get(slug="bench")
    for body in _batches(40, to_protobuf, rng):
        # As the request path stores them: decoded there, written as span rows.
        accepted_batch_store(team=team, token=None, decoded=decode_otlp_protobuf(body))
    profiler = cProfile.Profile()
    profiler.enable()
    while raw_batches_drain().more:
        pass
    from django.utils import timezone

    later = timezone.now() + timedelta(seconds=60)
    while traces_finalize_due(now=later, limit=1000).traces:
        pass
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(12)
    out.write("Steps, cumulative (wall) seconds and calls:\n")
    timings: dict[tuple[str, int, str], tuple[Any, ...]] = stats.stats  # type: ignore[attr-defined]
    for (path, _, function), (_, calls, _, cumulative, _) in timings.items():
        if function in PROFILED_STEPS and "/apps/" in path:
            where = path.split("/apps/", 1)[1]
            out.write(f"  {cumulative:8.3f} s {calls:6d}  {function} ({where})\n")
    return out.getvalue()


def run() -> None:
    if settings.CELERY_BROKER_URL.startswith("filesystem"):
        print("ingest benchmark: set CELERY_BROKER_URL (Redis)")
        return
    with override_settings(SPAN_STORE_URL=SPAN_STORE_URL):
        _run()


def _run() -> None:
    from apps.ingest.span_store import span_store

    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    span_store_prepare(SPAN_STORE_URL)
    logs = Path(settings.VAR_DIR) / "bench-ingest"
    logs.mkdir(parents=True, exist_ok=True)
    rng = random.Random(11)
    try:
        token, _ = _setup()
        from apps.ingest.models import RawBatch

        port = free_port()
        web = [
            sys.executable, "-m", "gunicorn", "budgets_site.wsgi", "--workers", "1",
            "--worker-class", "gthread", "--threads", str(CONNECTIONS),
            "--bind", f"127.0.0.1:{port}", "--keep-alive", "30",
        ]  # fmt: skip
        protobuf, json = "application/x-protobuf", "application/json"
        grpc_port = free_port()
        grpc_server = [sys.executable, "manage.py", "serve_otlp_grpc"]
        grpc_env = _env(
            {"DEBUG": "false", "OTLP_GRPC_PORT": str(grpc_port),
             "OTLP_GRPC_THREADS": str(CONNECTIONS)}
        )  # fmt: skip
        with (
            _process(web, logs / "web.log", _env({"DEBUG": "false"})) as web_proc,
            _process(grpc_server, logs / "grpc.log", grpc_env) as grpc_proc,
        ):
            _wait_http(port)
            _wait_grpc(grpc_port)
            accept = {
                "protobuf": _accept_phase(
                    Sender(port, token, protobuf), _batches(ACCEPT_REQUESTS + 10, to_protobuf, rng)
                ),
                "OTLP JSON": _accept_phase(
                    Sender(port, token, json), _batches(ACCEPT_REQUESTS + 10, to_otlp_json, rng)
                ),
                "gRPC protobuf": _accept_phase(
                    GrpcSender(grpc_port, token), _batches(ACCEPT_REQUESTS + 10, to_protobuf, rng)
                ),
            }
            RawBatch.objects.all().delete()
            print_rows(
                "Accept: one web process (gunicorn, 4 threads) or one gRPC process (4 threads), "
                "512-span batches, one client",
                accept,
                ["requests", "spans_per_s", "p50_ms", "p95_ms", "max_ms", "body_kb"],
            )
            e2e = {
                "protobuf": _end_to_end(
                    lambda: Sender(port, token, protobuf), logs, rng, web_pid=web_proc.pid,
                    rate=RATE,
                ),
                "OTLP JSON": _end_to_end(
                    lambda: Sender(port, token, json), logs, rng, web_pid=web_proc.pid,
                    json=True, rate=RATE_JSON,
                ),
                "gRPC protobuf": _end_to_end(
                    lambda: GrpcSender(grpc_port, token), logs, rng, web_pid=grpc_proc.pid,
                    rate=RATE,
                ),
            }  # fmt: skip
        print("\nEnd to end: request -> finalized stage samples (1 web or gRPC process, 1 worker)")
        width = max(len(key) for key in e2e["protobuf"]) + 2
        print("".ljust(width + 2) + "".join(name.rjust(16) for name in e2e))
        for key, value in e2e["protobuf"].items():
            if key != "last_finalized" and not isinstance(value, dict):
                cells = "".join(str(row.get(key)).rjust(16) for row in e2e.values())
                print(f"  {key:{width}}{cells}")
        for name, phase in e2e.items():
            for replica, parts in phase.get("ch_replicas", {}).items():
                print(f"  ClickHouse {replica}, {name}: {parts}")
        for name, phase in e2e.items():
            for query, us in phase.get("pg_top_statements_us_per_span", {}).items():
                print(f"  PostgreSQL, {name}: {us:6.1f} us/span  {query}")
        profile = _profile(token, rng)
        print("\nWorker profile (drain + finalize, in process), top functions by own time")
        print(profile)
        path = write(
            "ingest",
            {**{f"accept {k}": v for k, v in accept.items()}, "end_to_end": e2e},
            {
                "span_store": span_store().name,
                "span_store_url": SPAN_STORE_URL,
                "batch_spans": 512,
                "duration_s": DURATION_S,
                "idle_s": IDLE_S,
                "worker_concurrency": WORKER_CONCURRENCY,
                "offered_spans_per_s": {
                    "protobuf": RATE,
                    "OTLP JSON": RATE_JSON,
                    "gRPC protobuf": RATE,
                },
                "profile": profile,
            },
        )
        print(f"written {path}")
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)
