"""Soak: the whole stack at half its capacity for half an hour, watched for leaks and backlog.

``python -m bench soak`` (not in ``make bench``). It starts gunicorn, one Celery worker on
every queue and ``celery beat`` as production runs them (``bench/soak_stack.py``), on a
fresh database of its own and the Redis of ``CELERY_BROKER_URL`` / ``REDIS_URL``, with a
team whose pipeline has the demo's stages, a webhook channel to a receiver in this
process and an alert rule that fires and reminds every minute. The project's traffic
simulator sends OTLP/HTTP through the official exporter (``bench/soak_load.py``).

Unless ``BENCH_SOAK_RATE`` (spans/s) is set, a ramp first measures what this machine
carries with the simulator as its client: steps of ``RAMP_STEP_S`` seconds from
``BENCH_SOAK_RAMP_FROM`` spans/s (500), each ``RAMP_FACTOR`` times the last, until a step
is missed twice in a row: under 95 % of the offered spans acknowledged or 90 % stored, a
span dropped or refused, more than 5 s of spans waiting, or a trace holding its root
still unanalyzed 15 s after its last span. The soak runs at half the last step kept up
with, on a second fresh database and freshly started processes, so that the ramp's peaks
are not in their memory.

Every ``BENCH_SOAK_SAMPLE_S`` seconds (30) it samples the RSS of every process, the
backlog, the spans acknowledged and stored, and the HTTP statuses; at the end it prints
and writes ``bench/results/soak.json`` and exits non-zero if a process of the project
grew by more than ``BENCH_SOAK_RSS_GROWTH`` percent (25) after the warm-up (the first
5 minutes, or a third of a shorter run), the backlog kept growing or did not drain, an
acknowledged span was not stored, a span was dropped or refused, or a log holds an
error line.
"""

import os
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import redis
from django.conf import settings
from django.db import connection
from django.test.utils import setup_test_environment

from bench.cpu import CpuMeter
from bench.report import write
from bench.soak_load import LoadProcess, load_processes, totals
from bench.soak_report import backlog_rows, checks, http_totals, print_report, process_rows
from bench.soak_sample import Sampler, backlog, log_lines
from bench.soak_stack import RENOTIFY_MINUTES, Stack, running_stack, soak_setup, stack_env

RATE = float(os.environ.get("BENCH_SOAK_RATE") or 0)
MINUTES = float(os.environ.get("BENCH_SOAK_MINUTES", "30"))
DURATION_S = MINUTES * 60
WARMUP_S = float(os.environ.get("BENCH_SOAK_WARMUP_MINUTES") or min(5.0, MINUTES / 3)) * 60
SAMPLE_S = float(os.environ.get("BENCH_SOAK_SAMPLE_S", "30"))
RSS_GROWTH_PCT = float(os.environ.get("BENCH_SOAK_RSS_GROWTH", "25"))
# One simulator process saturates its core at a few thousand spans/s: two share the load.
LOADS = int(os.environ.get("BENCH_SOAK_LOADS", "2"))
WEB_WORKERS = 2  # one per core
CONCURRENCY = 2  # the worker's pool processes, as in the Procfile
RAMP_FROM = float(os.environ.get("BENCH_SOAK_RAMP_FROM", "500"))
RAMP_FACTOR, RAMP_STEP_S, RAMP_STEPS = 1.4, 30.0, 12
RAMP_LEAD_S = 5.0  # the load processes' first export, not counted
DRAIN_TIMEOUT_S = 180.0
LOG_NAMES = ["web.log", "worker.log", "beat.log"] + [f"load-{i + 1}.log" for i in range(LOADS)]


@contextmanager
def _fresh_database() -> Iterator[None]:
    # create_test_db returns the new database's name, not the one to restore: keep that
    # one here, or the second fresh database would be named after the first.
    configured = connection.settings_dict["NAME"]
    connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    try:
        yield
    finally:
        connection.creation.destroy_test_db(configured, verbosity=0)


def _drained(timeout: float) -> float | None:
    """Seconds until every accepted span is stored and every trace holding its root is
    analyzed, or None. A trace whose root never came (its spans dropped by an exporter)
    waits for ``TRACE_MAX_WAIT_SECONDS`` by design: that is not a backlog."""
    from apps.ingest.models import RawBatch, Trace, TraceState

    start = time.monotonic()
    while time.monotonic() - start < timeout:
        rooted = Trace.objects.filter(state=TraceState.OPEN, root_span_id__isnull=False)
        if not RawBatch.objects.exists() and not rooted.exists():
            return time.monotonic() - start
        time.sleep(1.0)
    return None


def _ramp_step(stack: Stack, token: str, rate: float, broker: redis.Redis) -> dict[str, Any]:
    with load_processes(
        url=stack.url, token=token, rate=rate, seconds=RAMP_LEAD_S + RAMP_STEP_S,
        logs=stack.logs, count=LOADS, env=stack_env(),
    ) as loads:  # fmt: skip
        time.sleep(RAMP_LEAD_S)
        before, stored_before = totals(loads), backlog(broker)["stored_spans"]
        start = time.monotonic()
        time.sleep(RAMP_STEP_S)
        after, now = totals(loads), backlog(broker)
        elapsed = time.monotonic() - start
    final = totals(loads)  # once the load processes have drained their exporters
    planned = (after["planned_spans"] - before["planned_spans"]) / elapsed
    acknowledged = (after["exported_spans"] - before["exported_spans"]) / elapsed
    stored = (now["stored_spans"] - stored_before) / elapsed
    # Spans the SDK's queue dropped because the exporter fell behind: never sent.
    dropped = final["planned_spans"] - final["exported_spans"] - final["failed_spans"]
    kept_up = (
        acknowledged >= 0.95 * rate
        and stored >= 0.9 * rate
        and now["pending_spans"] <= 5 * rate
        and now["oldest_open_trace_s"] <= 15
        and not final["failed_spans"]
        and not dropped
    )
    return {
        "offered": round(rate),
        "planned_per_s": round(planned),
        "acknowledged_per_s": round(acknowledged),
        "stored_per_s": round(stored),
        "pending_spans": now["pending_spans"],
        "oldest_open_trace_s": now["oldest_open_trace_s"],
        "failed_spans": final["failed_spans"],
        "dropped_spans": dropped,
        "kept_up": kept_up,
    }


def _ramp(logs: Path, receiver_url: str) -> tuple[float, dict[str, dict[str, Any]]]:
    token = soak_setup(receiver_url)
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    steps: dict[str, dict[str, Any]] = {}
    with running_stack(logs, web_workers=WEB_WORKERS, concurrency=CONCURRENCY) as stack:
        rate, retried = RAMP_FROM, False
        for _ in range(RAMP_STEPS):
            step = _ramp_step(stack, token, rate, broker)
            steps[f"{rate:.0f} spans/s" + (" (again)" if retried else "")] = step
            print(f"  ramp {step}", flush=True)
            drained = _drained(60) is not None
            if not step["kept_up"] and not retried and drained:
                # Other work on a shared machine comes and goes: a step missed is tried
                # once more before it ends the ramp.
                retried = True
                continue
            if not step["kept_up"] or not drained:
                break
            rate, retried = round(rate * RAMP_FACTOR, -1), False
    kept = [s["offered"] for s in steps.values() if s["kept_up"]]
    return float(max(kept, default=0)), steps


def _alerts(received: int) -> dict[str, Any]:
    from apps.alerts.models import DeliveryAttempt, Incident, Notification

    def by(queryset: Any, field: str) -> dict[str, int]:
        return dict(Counter(queryset.values_list(field, flat=True)))

    return {
        "webhooks_received": received,
        "incidents": Incident.objects.count(),
        "notifications": by(Notification.objects, "event"),
        "notification_status": by(Notification.objects, "status"),
        "attempt_outcomes": by(DeliveryAttempt.objects, "outcome"),
    }


def _sample_until_end(sampler: Sampler, loads: list[LoadProcess], meter: CpuMeter) -> tuple:
    samples: list[dict[str, Any]] = []
    cpu_from: tuple[float, dict[str, float]] | None = None
    start = time.monotonic()
    while True:
        elapsed = time.monotonic() - start
        if cpu_from is None and elapsed >= WARMUP_S - 1:
            cpu_from = (elapsed, meter.snapshot())
        sample = sampler.sample(elapsed, totals(loads))
        samples.append(sample)
        rss = sum(p["rss_kb"] for p in sample["processes"].values()) / 1024
        print(
            f"  {elapsed:6.0f} s  acknowledged {sample['load']['exported_spans']:>10,}  "
            f"stored {sample['backlog']['stored_spans']:>10,}  pending "
            f"{sample['backlog']['pending_spans']:>6,}  open {sample['backlog']['open_traces']:>5,}"
            f"  RSS total {rss:,.0f} MB",
            flush=True,
        )
        if elapsed >= DURATION_S - 1:
            break
        next_at = min(start + len(samples) * SAMPLE_S, start + DURATION_S)
        time.sleep(max(0.0, next_at - time.monotonic()))
    assert cpu_from is not None
    window_s = time.monotonic() - start - cpu_from[0]
    spent = CpuMeter.spent(cpu_from[1], meter.snapshot())
    # The meter's PostgreSQL figure is the whole server's, which other databases share here.
    spent.pop("postgres")
    return samples, {name: round(s / window_s, 2) for name, s in spent.items()}


def _soak(logs: Path, rate: float, receiver: Any) -> dict[str, Any]:
    token = soak_setup(receiver.url())
    received_before = len(receiver.requests)  # the ramp's deliveries
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    with (
        running_stack(logs, web_workers=WEB_WORKERS, concurrency=CONCURRENCY) as stack,
        load_processes(
            url=stack.url, token=token, rate=rate, seconds=DURATION_S, logs=logs, count=LOADS,
            env=stack_env(),
        ) as loads,
    ):  # fmt: skip
        sampler = Sampler(stack, loads)
        roots = {**stack.pids, **{f"load {i + 1}": load.proc.pid for i, load in enumerate(loads)}}
        samples, cpu = _sample_until_end(sampler, loads, CpuMeter(**roots))
        for load in loads:
            load.proc.wait(timeout=90)  # each drains its exporter's queue first
        sent = totals(loads)
        drained_s = _drained(DRAIN_TIMEOUT_S)
        after = backlog(broker)
        last_http = sampler._http()
        alerts = _alerts(len(receiver.requests) - received_before)
        seen = sampler.pids_seen
    warm_index = next((i for i, s in enumerate(samples) if s["t_s"] >= WARMUP_S - 1), -1)
    processes = process_rows(samples, warm_index, seen)
    backlog_table = backlog_rows(samples, warm_index, after)
    spans = {
        "planned": sent["planned_spans"],
        "acknowledged": sent["exported_spans"],
        "export_failed": sent["failed_spans"],
        # Dropped by the SDK's queue when the exporter falls behind: never sent.
        "dropped": sent["planned_spans"] - sent["exported_spans"] - sent["failed_spans"],
        "stored": after["stored_spans"],
        "traces_planned": sent["traces"],
    }
    logs_found = log_lines(logs, LOG_NAMES)
    return {
        "processes": processes,
        "backlog": backlog_table,
        "spans": spans,
        "http": http_totals(samples, last_http),
        "alerts": alerts,
        "cpu_cores": cpu,
        "logs": logs_found,
        "checks": checks(
            processes=processes,
            backlog=backlog_table,
            spans=spans,
            logs=logs_found,
            rate=rate,
            rss_limit_pct=RSS_GROWTH_PCT,
            drained_s=drained_s,
        ),
        "drain": {"after_s": None if drained_s is None else round(drained_s, 1)},
        "samples": {"every_s": SAMPLE_S, "list": samples},
    }


def run() -> int:
    if settings.CELERY_BROKER_URL.startswith("filesystem"):
        print("soak benchmark: set CELERY_BROKER_URL (Redis)")
        return 2
    from tests.alerts.receivers import HttpReceiver

    setup_test_environment()
    logs = Path(settings.VAR_DIR) / "bench-soak"
    logs.mkdir(parents=True, exist_ok=True)
    receiver = HttpReceiver().start()
    try:
        capacity: float | None = None
        ramp: dict[str, dict[str, Any]] = {}
        rate = RATE
        if not rate:
            print(f"Ramp from {RAMP_FROM:,.0f} spans/s, {RAMP_STEP_S:g} s a step", flush=True)
            with _fresh_database():
                capacity, ramp = _ramp(logs / "ramp", receiver.url())
            if not capacity:
                print("soak benchmark: the first ramp step was not kept up with")
                return 1
            rate = round(capacity / 2, -1)
        print(f"Soak at {rate:,.0f} spans/s for {MINUTES:g} min", flush=True)
        with _fresh_database():
            result = _soak(logs, rate, receiver)
            result["setup"] = {
                "rate_spans_per_s": rate,
                "capacity_spans_per_s": capacity,
                "minutes": MINUTES,
                "warmup_s": WARMUP_S,
                "sample_s": SAMPLE_S,
                "rss_growth_limit_pct": RSS_GROWTH_PCT,
                "load_processes": LOADS,
                "web": f"gunicorn, {WEB_WORKERS} workers x 4 threads",
                "worker": f"1 Celery worker, {CONCURRENCY} pool processes; celery beat apart",
                "alert": f"stage ttft over budget, webhook, reminders every {RENOTIFY_MINUTES} min",
                "cpu_count": os.cpu_count(),
                "load_average_end": os.getloadavg(),
            }
            print_report(result)
            results = {k: v for k, v in result.items() if isinstance(v, dict) and k != "setup"}
            results["ramp"] = ramp
            if ramp:
                results["ramp_logs"] = log_lines(logs / "ramp", LOG_NAMES)
            print(f"wrote {write('soak', results, result['setup'])}")
        return 0 if all(check["ok"] for check in result["checks"].values()) else 1
    finally:
        receiver.stop()
