"""An app's spans sent as the app itself would: the official OpenTelemetry SDK, a batch
span processor and the OTLP/HTTP exporter with an ingest token; then the workers' part
(drain, analysis once traces are quiet, rollups) run in the test's process."""

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind

from apps.analysis.services.finalize import traces_finalize_due
from apps.ingest.services.batches import raw_batches_drain
from apps.rollups.services.bucket_pass import rollups_process_dirty
from tests.builders.spans import HandSpan
from tests.rollups.hostile import go_quiet


def sdk_provider(url: str, token: str, *, service: str = "ask-api") -> TracerProvider:
    """A tracer provider exporting to ``url``'s ``/v1/traces`` with ``token``; shut it
    down to send what is left."""
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    exporter = OTLPSpanExporter(
        endpoint=f"{url}/v1/traces", headers={"Authorization": f"Bearer {token}"}, timeout=10
    )
    provider.add_span_processor(BatchSpanProcessor(exporter, max_export_batch_size=512))
    return provider


def replay(tracer: trace.Tracer, spans: list[HandSpan]) -> None:
    """Hand-built spans (parents first) as SDK spans with their own times and ids' shape."""
    opened: dict[str, trace.Span] = {}
    for hand in spans:
        parent = opened.get(hand.parent_id or "")
        context = trace.set_span_in_context(parent) if parent else Context()
        opened[hand.span_id] = tracer.start_span(
            hand.name,
            context=context,
            kind=SpanKind[hand.kind.upper()],
            attributes=hand.attributes,
            start_time=hand.start_ns,
        )
    for hand in reversed(spans):
        opened[hand.span_id].end(end_time=hand.end_ns)


def workers_settle() -> None:
    """What the workers do after spans arrive: drain, analyze once the traces have been
    quiet for a minute (as if a minute passed), roll up."""
    while raw_batches_drain().more:
        pass
    go_quiet()
    while traces_finalize_due().traces:
        pass
    while rollups_process_dirty().buckets:
        pass
