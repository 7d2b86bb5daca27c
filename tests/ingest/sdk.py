"""OpenTelemetry SDK spans with fixed ids and times, and the records they decode to."""

from typing import Any

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from apps.ingest.decoding import SpanEvent, SpanRecord

TRACE_ID = 0x5B8EFFF798038103D269B633813FC60C
ROOT_ID = 0x1111111111111111
CHAT_ID = 0x2222222222222222
QUEUE_ID = 0x3333333333333333
T0 = 1_760_000_000_000_000_000
MS = 1_000_000

API_RESOURCE = Resource(
    {"service.name": "chat-api", "deployment.environment.name": "test", "process.pid": 4242}
)
WORKER_RESOURCE = Resource({"host.name": "worker-1"})  # no service.name on purpose


def context(span_id: int, trace_id: int = TRACE_ID) -> SpanContext:
    return SpanContext(trace_id, span_id, is_remote=False, trace_flags=TraceFlags(1))


def readable(
    name: str,
    span_id: int,
    parent_id: int | None = None,
    *,
    start: int = T0,
    end: int = T0 + MS,
    kind: SpanKind = SpanKind.INTERNAL,
    attributes: dict[str, Any] | None = None,
    events: tuple[Event, ...] = (),
    status: Status | None = None,
    resource: Resource = API_RESOURCE,
    scope: str = "chat.instrumentation",
    trace_id: int = TRACE_ID,
) -> ReadableSpan:
    return ReadableSpan(
        name=name,
        context=context(span_id, trace_id),
        parent=context(parent_id, trace_id) if parent_id is not None else None,
        resource=resource,
        attributes=attributes or {},
        events=events,
        kind=kind,
        status=status or Status(StatusCode.UNSET),
        start_time=start,
        end_time=end,
        instrumentation_scope=InstrumentationScope(scope, "1.0.0"),
    )


def encode(spans: list[ReadableSpan]) -> bytes:
    return encode_spans(spans).SerializeToString()


def sample_spans() -> list[ReadableSpan]:
    """A root server span, an LLM call with deprecated GenAI names, and a producer
    span on a resource without service.name carrying bytes and a map."""
    return [
        readable(
            "POST /v1/chat",
            ROOT_ID,
            kind=SpanKind.SERVER,
            end=T0 + 2400 * MS,
            attributes={"http.request.method": "POST", "http.response.status_code": 200},
            status=Status(StatusCode.OK),
        ),
        readable(
            "chat gpt-4o",
            CHAT_ID,
            ROOT_ID,
            kind=SpanKind.CLIENT,
            start=T0 + 620 * MS,
            end=T0 + 2350 * MS,
            attributes={
                "gen_ai.system": "openai",
                "gen_ai.usage.prompt_tokens": 1200,
                "gen_ai.usage.completion_tokens": 300,
                "gen_ai.request.temperature": 0.2,
                "gen_ai.response.finish_reasons": ("stop", "length"),
                "stream": True,
            },
            events=(Event("first_token", {"gen_ai.response.chunk": 1}, T0 + 980 * MS),),
            status=Status(StatusCode.ERROR, "upstream timeout"),
        ),
        readable(
            "queue publish",
            QUEUE_ID,
            ROOT_ID,
            kind=SpanKind.PRODUCER,
            start=T0 + 2360 * MS,
            end=T0 + 2361 * MS,
            attributes={
                "messaging.system": "redis",
                "payload": b"\x01\xff",
                "routing": {"key": "jobs", "priority": 5},
            },
            resource=WORKER_RESOURCE,
            scope="jobs",
        ),
    ]


_TRACE = TRACE_ID.to_bytes(16, "big")
_API_ATTRIBUTES: dict[str, Any] = dict(API_RESOURCE.attributes)
_ROOT = ROOT_ID.to_bytes(8, "big")

SAMPLE_RECORDS = [
    SpanRecord(
        trace_id=_TRACE,
        span_id=_ROOT,
        parent_span_id=None,
        name="POST /v1/chat",
        service="chat-api",
        kind="server",
        start_ns=T0,
        end_ns=T0 + 2400 * MS,
        status="ok",
        status_message="",
        attributes={"http.request.method": "POST", "http.response.status_code": 200},
        resource=_API_ATTRIBUTES,
        scope_name="chat.instrumentation",
        events=[],
    ),
    SpanRecord(
        trace_id=_TRACE,
        span_id=CHAT_ID.to_bytes(8, "big"),
        parent_span_id=_ROOT,
        name="chat gpt-4o",
        service="chat-api",
        kind="client",
        start_ns=T0 + 620 * MS,
        end_ns=T0 + 2350 * MS,
        status="error",
        status_message="upstream timeout",
        attributes={
            "gen_ai.system": "openai",
            "gen_ai.usage.prompt_tokens": 1200,
            "gen_ai.usage.completion_tokens": 300,
            "gen_ai.request.temperature": 0.2,
            "gen_ai.response.finish_reasons": ["stop", "length"],
            "stream": True,
            "gen_ai.provider.name": "openai",
            "gen_ai.usage.input_tokens": 1200,
            "gen_ai.usage.output_tokens": 300,
        },
        resource=_API_ATTRIBUTES,
        scope_name="chat.instrumentation",
        events=[SpanEvent("first_token", T0 + 980 * MS, {"gen_ai.response.chunk": 1})],
    ),
    SpanRecord(
        trace_id=_TRACE,
        span_id=QUEUE_ID.to_bytes(8, "big"),
        parent_span_id=_ROOT,
        name="queue publish",
        service="unknown_service",
        kind="producer",
        start_ns=T0 + 2360 * MS,
        end_ns=T0 + 2361 * MS,
        status="unset",
        status_message="",
        attributes={
            "messaging.system": "redis",
            "payload": "01ff",
            "routing.key": "jobs",
            "routing.priority": 5,
        },
        resource={"host.name": "worker-1"},
        scope_name="jobs",
        events=[],
    ),
]


def by_span_id(records: list[SpanRecord]) -> list[SpanRecord]:
    return sorted(records, key=lambda record: record.span_id)
