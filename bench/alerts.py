"""Alert latency: from the first over-budget trace's arrival to the webhook's receipt.

Starts one gunicorn web process and one Celery worker (two pool processes, with the
scheduler) with default settings against a fresh test database, and a webhook receiver
in this process. ``BENCH_ALERT_PIPELINES`` pipelines (default 20) each get traffic at
``BENCH_ALERT_RPS`` traces/s (default 2) whose retrieval takes 100 ms against a 350 ms
budget; after a warm-up (``BENCH_ALERT_WARMUP_S``, default 40 s) the pipelines turn slow
one after the other (retrieval 600 ms), 3 s apart, and each pipeline's one alert is one
measurement. Each pipeline has
one rule: any stage, ``violation_for_minutes: 0``, a native webhook channel; budgets are
evaluated with the defaults (a 300 s window, 20 samples at least), so the p95 crosses
the budget once a twentieth of the window's traces are slow.

For each incident the benchmark notes when the first slow trace was accepted (HTTP 200),
then, polling the database, when its stage sample was written (trace settle wait and
analysis), when its 10 s rollup bucket held it (rollup), when the violation opened (the
window's p95 crossing the budget, and the budget check), when the incident opened (alert
evaluation), when the delivery attempt started (queue) and when the receiver got the
webhook (delivery).
"""

import http.client
import json
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection
from django.test.utils import setup_test_environment

from bench.ingest import _env, _process, _wait_http
from bench.report import percentile, print_rows, write
from tests.processes import free_port

PIPELINES = int(os.environ.get("BENCH_ALERT_PIPELINES", "20"))
RPS = float(os.environ.get("BENCH_ALERT_RPS", "2"))
# Fast traffic before the first pipeline turns slow; 300 fills the default window, so that
# the p95 moves only once 5 % of a full window's traces are slow.
WARMUP_S = float(os.environ.get("BENCH_ALERT_WARMUP_S", "40"))
STAGGER_S = 3.0
TIMEOUT_S = 120.0
FAST_MS, SLOW_MS, BUDGET_MS = 100, 600, 350
STEPS = ("analysis", "rollup", "violation", "alert evaluation", "queue", "delivery")


class Receiver(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.received: list[tuple[float, dict[str, Any]]] = []
        self.lock = threading.Lock()


class _Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        at = time.time()
        with self.server.lock:
            self.server.received.append((at, json.loads(body)))
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@dataclass
class _Flow:
    """One pipeline's traffic: fast until ``slow_from``, slow until ``slow_until``."""

    slug: str
    root: str
    pipeline_id: int
    stage_id: int
    slow_from: float = float("inf")
    slow_until: float = float("inf")
    first_slow: tuple[float, int] | None = None  # accepted at, trace id
    marks: dict[str, float] = field(default_factory=dict)


def _trace_body(trace_id: int, retrieval_ms: int, root: str) -> bytes:
    from tests.builders.spans import otlp_json, retrieval_request
    from tests.timing import MS

    t0 = time.time_ns() - (retrieval_ms + 100) * MS
    return otlp_json(retrieval_request(trace_id, t0, retrieval_ms=retrieval_ms, root=root))


def _sender(port: int, token: str, flows: list[_Flow], stop: threading.Event) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    serial = 1
    period = 1 / RPS
    next_at = time.monotonic()
    while not stop.is_set():
        for flow in flows:
            now = time.time()
            slow = flow.slow_from <= now < flow.slow_until
            serial += 1
            trace_id = (serial << 64) | flow.pipeline_id
            body = _trace_body(trace_id, SLOW_MS if slow else FAST_MS, flow.root)
            conn.request("POST", "/v1/traces", body=body, headers=headers)
            response = conn.getresponse()
            response.read()
            if slow and flow.first_slow is None and response.status == 200:
                flow.first_slow = (time.time(), trace_id)
        next_at += period
        time.sleep(max(0.0, next_at - time.monotonic()))


def _setup(receiver_url: str) -> tuple[str, list[Any]]:
    from django.test import override_settings

    from apps.alerts.models import ChannelKind
    from apps.alerts.services.channels import channel_create
    from apps.alerts.services.rules import alert_rule_create
    from apps.teams.services import ingest_token_create
    from tests.builders.configuration import (
        make_pipeline,
        make_rule,
        make_stage,
        make_team,
        make_user,
    )

    team = make_team("bench", owner=make_user("bench"))
    # The receiver listens on loopback: allowed here, where the channel is saved, as in
    # the environment of the processes that send.
    with override_settings(WEBHOOK_ALLOW_PRIVATE_IPS=True):
        channel = channel_create(team=team, slug="hook", kind=ChannelKind.WEBHOOK, url=receiver_url)
    pipelines = []
    for index in range(PIPELINES):
        pipeline = make_pipeline(
            team, f"chat-{index}", match_root_span=f"POST /chat/{index}", budget={"p95": 50_000}
        )
        make_rule(make_stage(pipeline, "retrieval", budget_ms=BUDGET_MS), span_name="retrieve*")
        alert_rule_create(
            team=team, pipeline=pipeline, slug=f"slow-{index}", channels=[channel],
            scope="any_stage",
        )  # fmt: skip
        pipelines.append(pipeline)
    _, raw = ingest_token_create(team=team, name="bench", created_by=None)
    return raw, pipelines


def _mark(flow: _Flow, step: str, at: float | None) -> None:
    if at is not None and step not in flow.marks:
        flow.marks[step] = at


def _observe(flow: _Flow, receiver: Receiver) -> None:
    """Note each step of ``flow``'s alert that has happened since the last look."""
    from apps.alerts.models import DeliveryAttempt, Incident
    from apps.analysis.models import StageSample
    from apps.ingest.models import Trace
    from apps.rollups.models import RollupBucket, Violation

    assert flow.first_slow is not None
    accepted, trace_id = flow.first_slow
    now = time.time()
    if "analysis" not in flow.marks:
        trace_pk = (
            Trace.objects.filter(trace_id=trace_id.to_bytes(16, "big"))
            .values_list("pk", flat=True)
            .first()
        )
        if trace_pk and StageSample.objects.filter(trace_pk=trace_pk).exists():
            _mark(flow, "analysis", now)
    if "analysis" in flow.marks and "rollup" not in flow.marks:
        held = RollupBucket.objects.filter(
            pipeline_id=flow.pipeline_id, stage_id=flow.stage_id, resolution=10,
            max_ns__gte=SLOW_MS * 1_000_000 * 0.9, computed_at__gte=_aware(accepted - 5),
        ).exists()  # fmt: skip
        if held:
            _mark(flow, "rollup", now)
    since = _aware(flow.slow_from)
    violation = Violation.objects.filter(pipeline_id=flow.pipeline_id, opened_at__gte=since).first()
    if violation is not None:
        _mark(flow, "rollup", violation.opened_at.timestamp())
        _mark(flow, "violation", violation.opened_at.timestamp())
    incident = Incident.objects.filter(pipeline_id=flow.pipeline_id, started_at__gte=since).first()
    if incident is None:
        return
    _mark(flow, "alert evaluation", incident.started_at.timestamp())
    attempt = (
        DeliveryAttempt.objects.filter(notification__incident=incident)
        .order_by("started_at")
        .first()
    )
    if attempt is not None:
        _mark(flow, "queue", attempt.started_at.timestamp())
    with receiver.lock:
        got = [at for at, body in receiver.received if body["incident"]["id"] == incident.pk]
    if got:
        _mark(flow, "delivery", min(got))


def _aware(epoch: float) -> Any:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(epoch, tz=UTC)


def _measure(port: int, token: str, flows: list[_Flow], receiver: Receiver) -> None:
    stop = threading.Event()
    sender = threading.Thread(target=_sender, args=(port, token, flows, stop), daemon=True)
    sender.start()
    start = time.time()
    for index, flow in enumerate(flows):
        flow.slow_from = start + WARMUP_S + index * STAGGER_S
    deadline = flows[-1].slow_from + TIMEOUT_S
    try:
        while time.time() < deadline:
            pending = [f for f in flows if "delivery" not in f.marks]
            if not pending:
                break
            for flow in pending:
                if flow.first_slow is not None:
                    _observe(flow, receiver)
            time.sleep(0.1)
    finally:
        stop.set()
        sender.join(timeout=30)


def _rows(flows: list[_Flow]) -> dict[str, dict[str, Any]]:
    done = [f for f in flows if "delivery" in f.marks and f.first_slow]
    rows: dict[str, dict[str, Any]] = {}
    previous = {id(f): f.first_slow[0] for f in done if f.first_slow}
    for step in STEPS:
        spans = []
        for flow in done:
            at = flow.marks.get(step, previous[id(flow)])
            spans.append(max(0.0, at - previous[id(flow)]))
            previous[id(flow)] = max(at, previous[id(flow)])
        rows[step] = _seconds(spans)
    rows["total"] = _seconds([f.marks["delivery"] - f.first_slow[0] for f in done if f.first_slow])
    return rows


def _seconds(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"n": 0, "mean_s": None, "p50_s": None, "p95_s": None, "max_s": None}
    return {
        "n": len(values),
        "mean_s": round(sum(values) / len(values), 2),
        "p50_s": round(percentile(values, 50), 2),
        "p95_s": round(percentile(values, 95), 2),
        "max_s": round(max(values), 2),
    }


def run() -> None:
    if settings.CELERY_BROKER_URL.startswith("filesystem"):
        print("alerts benchmark: set CELERY_BROKER_URL (Redis)")
        return
    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    logs = Path(settings.VAR_DIR) / "bench-alerts"
    logs.mkdir(parents=True, exist_ok=True)
    receiver = Receiver()
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{receiver.server_address[1]}/hook"
        token, pipelines = _setup(url)
        flows = [_Flow(p.slug, p.match_root_span, p.pk, p.stages.get().pk) for p in pipelines]
        port = free_port()
        web = [
            sys.executable, "-m", "gunicorn", "budgets_site.wsgi", "--workers", "1",
            "--worker-class", "gthread", "--threads", "4", "--bind", f"127.0.0.1:{port}",
        ]  # fmt: skip
        worker = [
            sys.executable, "-m", "celery", "-A", "budgets_site", "worker", "-B",
            "-Q", "ingest,rollup,alerts,whatif", "--concurrency", "2", "--loglevel", "WARNING",
            "--schedule", str(logs / "beat-schedule"),
        ]  # fmt: skip
        # The defaults of every setting but one: the receiver listens on loopback.
        env = _env({"DEBUG": "false", "WEBHOOK_ALLOW_PRIVATE_IPS": "true"})
        env.pop("TRACE_IDLE_SECONDS")
        env.pop("TRACE_SETTLE_SECONDS")
        env.pop("INGEST_RATE_LIMIT_SPANS")
        env.pop("INGEST_MAX_BYTES_PER_ACCOUNT_PER_DAY")
        with (
            _process(web, logs / "web.log", env),
            _process(worker, logs / "worker.log", env),
        ):
            _wait_http(port)
            _measure(port, token, flows, receiver)
        rows = _rows(flows)
        title = (
            f"Alert latency, first over-budget trace accepted -> webhook received "
            f"({rows['total']['n']} of {len(flows)} alerts; seconds per step)"
        )
        print_rows(title, rows, ["n", "mean_s", "p50_s", "p95_s", "max_s"])
        setup = {
            "pipelines": PIPELINES, "traces_per_s_each": RPS, "warmup_s": WARMUP_S,
            "stagger_s": STAGGER_S, "retrieval_ms": [FAST_MS, SLOW_MS], "budget_ms": BUDGET_MS,
            "web": "gunicorn, 1 process, 4 threads", "worker": "1 Celery worker, 2 processes, beat",
        }  # fmt: skip
        print(f"wrote {write('alerts', rows, setup)}")
    finally:
        receiver.shutdown()
        connection.creation.destroy_test_db(old_name, verbosity=0)
