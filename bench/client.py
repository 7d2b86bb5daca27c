"""The run-time client's overhead: what a stage, a request and a lever's check cost the
application, with the OpenTelemetry SDK installed and without it.

"With an SDK": a ``TracerProvider`` with a ``BatchSpanProcessor`` whose exporter drops
the spans, as an application's would (the export runs on the processor's thread). The
bare SDK span (a current span with the same attributes, what any instrumentation of a
stage needs) is measured beside it, and the client's own share is the difference. Each figure is the
median over repeats of the mean over a batch of calls, in microseconds. One core.
"""

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from latency_budgets import Budgets
from opentelemetry import context, trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from bench.report import print_rows, write

BATCH = 2000
REPEAT = 15
DOCUMENT = {
    "version": 1,
    "pipeline": "rag-chat",
    "deadline_ms": 60_000,
    "stages": [
        {
            "stage": slug,
            "position": position,
            "budget": {"percentile": "p95", "ms": 500},
            "observed": {"count": 1000, "p50": 100.0, "p95": 300.0, "p99": 450.0},
        }
        for position, slug in enumerate(("retrieval", "rerank", "llm"))
    ],
}


class _Dropped(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def _us_per_call(action: Callable[[], object]) -> float:
    for _ in range(BATCH // 4):
        action()
    runs = []
    for _ in range(REPEAT):
        start = time.perf_counter()
        for _ in range(BATCH):
            action()
        runs.append((time.perf_counter() - start) / BATCH)
    return round(statistics.median(runs) * 1e6, 2)


def _rows(budgets: Budgets, provider: TracerProvider | None) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    with budgets.request("rag-chat") as req:

        def stage() -> None:
            with req.stage("rerank"):
                pass

        figures["stage"] = _us_per_call(stage)
        figures["should_skip"] = _us_per_call(lambda: req.should_skip("rerank"))
        figures["timeout_for"] = _us_per_call(lambda: req.timeout_for("rerank"))
        figures["remaining_ms"] = _us_per_call(lambda: req.remaining_ms)

    def request() -> None:
        with budgets.request("rag-chat"):
            pass

    figures["request"] = _us_per_call(request)
    if provider is not None:
        tracer = provider.get_tracer("bench")

        def raw_span() -> None:
            # What any instrumentation of a stage needs at least: a current span with
            # the same two attributes.
            span = tracer.start_span(
                "rerank",
                attributes={"latency_budget.stage": "rerank", "latency_budget.allowance_ms": 1.0},
            )
            token = context.attach(trace.set_span_in_context(span))
            span.end()
            context.detach(token)

        figures["raw SDK span"] = _us_per_call(raw_span)
        figures["client's own"] = round(figures["stage"] - figures["raw SDK span"], 2)
    else:
        figures["client's own"] = figures["stage"]
    return figures


def run() -> None:
    rows: dict[str, dict[str, Any]] = {}
    without = Budgets.from_documents([DOCUMENT])
    rows["without an SDK"] = _rows(without, None)
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(_Dropped(), max_queue_size=1 << 16))
    try:
        with_sdk = Budgets.from_documents([DOCUMENT], tracer_provider=provider)
        rows["with the SDK"] = _rows(with_sdk, provider)
    finally:
        provider.shutdown()
    columns = [
        "stage", "raw SDK span", "client's own", "request", "should_skip", "timeout_for",
        "remaining_ms",
    ]  # fmt: skip
    print_rows("Client overhead, µs per call (median)", rows, columns)
    write("client", rows, {"batch": BATCH, "repeat": REPEAT})
