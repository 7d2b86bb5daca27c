"""The soak benchmark's load: the project's traffic simulator in processes of its own.

Each load process plans RAG-chat traces with ``apps.demo.traffic`` and sends them
through the OpenTelemetry SDK and its OTLP/HTTP exporter, as an instrumented service
would, at a fixed span rate. One Python process tops out at a few thousand spans a
second (the SDK's spans and the exporter's protobuf are pure Python), so the rate is
split over several. Every second a process replaces a small JSON file with its counts
so far, which the benchmark samples; the last write follows the exporter's drain.

Run by the benchmark as ``python -m bench.soak_load URL TOKEN SPANS_PER_S SECONDS STATS``.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
COUNTS = ("planned_spans", "traces", "exported_spans", "failed_spans", "failed_batches")


@dataclass
class LoadProcess:
    proc: subprocess.Popen[bytes]
    stats_path: Path

    def stats(self) -> dict[str, Any]:
        try:
            return dict(json.loads(self.stats_path.read_text()))
        except (OSError, ValueError):
            return dict.fromkeys(COUNTS, 0) | {"done": False}


def totals(loads: list[LoadProcess]) -> dict[str, int]:
    every = [load.stats() for load in loads]
    return {name: sum(int(s.get(name, 0)) for s in every) for name in COUNTS}


@contextmanager
def load_processes(
    *,
    url: str,
    token: str,
    rate: float,
    seconds: float,
    logs: Path,
    count: int,
    env: dict[str, str],
) -> Iterator[list[LoadProcess]]:
    """``count`` load processes sharing ``rate`` spans/s for ``seconds``; stopped on exit."""
    loads = []
    for index in range(count):
        stats_path = logs / f"load-{index + 1}.json"
        stats_path.unlink(missing_ok=True)
        with (logs / f"load-{index + 1}.log").open("wb") as log:
            command = [
                sys.executable, "-m", "bench.soak_load", url, token, str(rate / count),
                str(seconds), str(stats_path), "--seed", str(index + 1),
            ]  # fmt: skip
            proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=log)
        loads.append(LoadProcess(proc, stats_path))
    try:
        deadline = time.monotonic() + 60
        while not all(load.stats_path.exists() for load in loads):
            if time.monotonic() > deadline or any(load.proc.poll() is not None for load in loads):
                raise RuntimeError(f"a load process did not start; see {logs}/load-*.log")
            time.sleep(0.1)
        yield loads
    finally:
        for load in loads:
            if load.proc.poll() is None:
                load.proc.send_signal(signal.SIGTERM)
        for load in loads:
            try:
                load.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                load.proc.kill()
                load.proc.wait()


def _main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak_load")
    parser.add_argument("url")
    parser.add_argument("token")
    parser.add_argument("rate", type=float, help="spans per second")
    parser.add_argument("seconds", type=float)
    parser.add_argument("stats", type=Path)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)

    import random

    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "budgets_site.settings_test")
    django.setup()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from apps.demo.traffic import CountingExporter, TracePlanner, TraceShape, drain, run_paced
    from apps.demo.traffic.traffic_plan import TracePlan

    class CountingPlanner(TracePlanner):
        """Counts the spans planned, to compare with what the exporter got acknowledged."""

        spans = traces = 0

        def plan(self, *, elapsed_s: float = 0.0) -> TracePlan:
            plan = super().plan(elapsed_s=elapsed_s)
            self.spans += len(plan.spans)
            self.traces += 1
            return plan

    shape = TraceShape()
    # Traces vary in size (tools are called in a fifth of them): pace traces by the mean.
    sizing = TracePlanner(rng=random.Random(args.seed), shape=shape)
    spans_per_trace = sum(len(sizing.plan().spans) for _ in range(2000)) / 2000
    exporter = CountingExporter(
        OTLPSpanExporter(
            endpoint=args.url.rstrip("/") + "/v1/traces",
            headers={"Authorization": f"Bearer {args.token}"},
        )
    )
    provider = TracerProvider(
        resource=Resource.create({"service.name": shape.service}), shutdown_on_exit=False
    )
    # Room for ten seconds of spans, so that a slow export does not drop any.
    provider.add_span_processor(
        BatchSpanProcessor(exporter, max_queue_size=max(2048, int(args.rate * 10)))
    )
    planner = CountingPlanner(rng=random.Random(args.seed), shape=shape)
    stop, done = threading.Event(), threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())

    def write_stats() -> None:
        counts = {
            "planned_spans": planner.spans,
            "traces": planner.traces,
            "exported_spans": exporter.exported_spans,
            "failed_spans": exporter.failed_spans,
            "failed_batches": exporter.failed_batches,
        }
        partial = args.stats.with_suffix(".tmp")
        partial.write_text(json.dumps(counts | {"done": done.is_set()}))
        os.replace(partial, args.stats)  # readers never see half a file

    def report() -> None:
        while not done.wait(1.0):
            write_stats()

    write_stats()
    reporter = threading.Thread(target=report, daemon=True)
    reporter.start()
    stats = run_paced(
        planner=planner,
        provider=provider,
        rps=args.rate / spans_per_trace,
        duration=args.seconds,
        stop=stop,
    )
    drain(provider=provider, exporter=exporter, timeout=30)
    done.set()
    reporter.join()
    write_stats()
    print(
        f"{stats.traces} traces, {planner.spans} spans planned in {stats.elapsed:.1f} s; "
        f"{exporter.exported_spans} exported, {exporter.failed_spans} failed"
    )
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
