"""Replaying planned traces into the OpenTelemetry SDK at a steady pace."""

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import grpc
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as HttpSpanExporter,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.trace import Status, StatusCode, Tracer

from apps.core.time import NS_PER_MS
from apps.demo.traffic.traffic_plan import TracePlan, TracePlanner

TRACES_PATH = "/v1/traces"
# The exporters, spelled as OTEL_EXPORTER_OTLP_PROTOCOL spells them.
HTTP_PROTOBUF, GRPC = "http/protobuf", "grpc"
PROTOCOLS = (HTTP_PROTOBUF, GRPC)
PROTOCOL_NAMES = {HTTP_PROTOBUF: "OTLP/HTTP", GRPC: "OTLP/gRPC"}
FLUSH_TIMEOUT_S = 10.0
# Honcho kills what has not stopped 5 s after Ctrl-C: leave time to print the summary.
FLUSH_AFTER_SIGNAL_TIMEOUT_S = 3.0


def emit_trace(*, tracer: Tracer, plan: TracePlan, start_ns: int) -> None:
    """Replay a plan into the tracer; spans end in time order, children before parents."""

    def at(offset_ms: float) -> int:
        return start_ns + round(offset_ms * NS_PER_MS)

    spans: list[trace.Span] = []
    depth: list[int] = []
    for planned in plan.spans:
        if planned.parent is None:
            context = Context()  # a new trace, whatever span may be current
            depth.append(0)
        else:
            context = trace.set_span_in_context(spans[planned.parent])
            depth.append(depth[planned.parent] + 1)
        span = tracer.start_span(
            planned.name,
            context=context,
            kind=planned.kind,
            attributes=planned.attributes,
            start_time=at(planned.start_ms),
        )
        for name, offset, attributes in planned.events:
            span.add_event(name, attributes, timestamp=at(offset))
        if planned.error:
            span.add_event(
                "exception",
                {"exception.type": "UpstreamError", "exception.message": planned.error},
                timestamp=at(planned.end_ms),
            )
            span.set_status(Status(StatusCode.ERROR, planned.error))
        spans.append(span)
    for index in sorted(range(len(spans)), key=lambda i: (plan.spans[i].end_ms, -depth[i])):
        spans[index].end(end_time=at(plan.spans[index].end_ms))


class CountingExporter(SpanExporter):
    """Wraps an exporter to count what reached the server and what did not."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner
        self.exported_spans = 0
        self.failed_spans = 0
        self.failed_batches = 0
        self._lock = threading.Lock()
        self._shut_down = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = self.inner.export(spans)
        with self._lock:
            if result is SpanExportResult.SUCCESS:
                self.exported_spans += len(spans)
            else:
                self.failed_spans += len(spans)
                self.failed_batches += 1
        return result

    def shutdown(self) -> None:
        with self._lock:
            if self._shut_down:
                return
            self._shut_down = True
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


def otlp_exporter(*, protocol: str, endpoint: str, token: str, gzip: bool) -> SpanExporter:
    """The SDK's own OTLP exporter for ``protocol``, with the team's ingest token: to the
    ``/v1/traces`` URL ``endpoint`` over OTLP/HTTP, or to ``endpoint`` as ``host:port``
    over OTLP/gRPC, in plaintext unless it reads ``https://host:port`` (then TLS, trusting
    what ``OTEL_EXPORTER_OTLP_CERTIFICATE`` names, else the system's roots)."""
    if protocol == GRPC:
        return GrpcSpanExporter(
            endpoint=endpoint,
            insecure=not endpoint.startswith("https://"),
            # gRPC metadata keys are lower case: the server reads this one.
            headers={"authorization": f"Bearer {token}"},
            compression=grpc.Compression.Gzip if gzip else grpc.Compression.NoCompression,
        )
    if protocol != HTTP_PROTOBUF:
        raise ValueError(f"protocol is one of {', '.join(PROTOCOLS)}, not {protocol!r}")
    return HttpSpanExporter(
        endpoint=endpoint,
        headers={"Authorization": f"Bearer {token}"},
        compression=Compression.Gzip if gzip else Compression.NoCompression,
    )


def otlp_provider(
    *,
    endpoint: str,
    token: str,
    service: str,
    rps: float,
    gzip: bool = False,
    protocol: str = HTTP_PROTOBUF,
) -> tuple[TracerProvider, CountingExporter]:
    """The SDK's tracer provider exporting to ``endpoint`` over ``protocol`` (see
    ``otlp_exporter``) with the team's ingest token, as a service of the team would; drain
    it with ``drain``."""
    exporter = CountingExporter(
        otlp_exporter(protocol=protocol, endpoint=endpoint, token=token, gzip=gzip)
    )
    provider = TracerProvider(
        resource=Resource.create(
            {"service.name": service, "deployment.environment.name": "simulated"}
        ),
        shutdown_on_exit=False,  # drained by the caller, with a time limit
    )
    # Room for ten seconds of spans, so a slow export does not drop any.
    queue_size = max(2048, int(rps * 15 * 10))
    provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=queue_size))
    return provider, exporter


def drain(*, provider: TracerProvider, exporter: SpanExporter, timeout: float) -> None:
    """Send what is still queued, giving up after ``timeout`` seconds.

    At Ctrl-C the server may already be gone and the exporter would keep retrying;
    shutting the exporter down aborts its retry and fails the remaining batches fast.
    """
    worker = threading.Thread(target=provider.shutdown, daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        exporter.shutdown()
        worker.join(timeout)


@dataclass
class RunStats:
    traces: int = 0
    spans: int = 0
    errors: int = 0
    elapsed: float = 0.0


def run_paced(
    *,
    planner: TracePlanner,
    provider: TracerProvider,
    rps: float,
    duration: float | None,
    stop: threading.Event,
    clock: Callable[[], float] = time.monotonic,
) -> RunStats:
    """Send traces at ``rps`` until ``duration`` seconds have passed or ``stop`` is set.

    Each trace ends "now", as if the request had just finished.
    """
    tracer = provider.get_tracer("latency_budgets.simulator")
    stats = RunStats()
    interval = 1.0 / rps
    started = clock()
    due = started
    while not stop.is_set():
        now = clock()
        if duration is not None and now - started >= duration:
            break
        if due > now:
            stop.wait(due - now)
            continue
        plan = planner.plan(elapsed_s=now - started)
        end_ns = time.time_ns()
        emit_trace(tracer=tracer, plan=plan, start_ns=end_ns - round(plan.root.end_ms * NS_PER_MS))
        stats.traces += 1
        stats.spans += len(plan.spans)
        stats.errors += plan.error
        # After a stall, carry on at the rate instead of bursting to catch up.
        due = max(due + interval, now - 1.0)
    stats.elapsed = clock() - started
    return stats
