"""Three spans with fixed ids and times that use much of OTLP, and the records they decode to."""

from typing import Any

from apps.ingest.decoding import SpanEvent, SpanRecord
from tests.builders.spans import RESOURCE, SERVICE, T0, TRACE_ID, HandSpan, span
from tests.timing import MS

ROOT_ID = 0x1111111111111111
CHAT_ID = 0x2222222222222222
QUEUE_ID = 0x3333333333333333


def sample_spans() -> list[HandSpan]:
    """A root server span, an LLM call with deprecated GenAI names, and a producer
    span on a resource without service.name carrying bytes and a map."""
    return [
        span(
            ROOT_ID,
            name="POST /v1/chat",
            kind="server",
            end=T0 + 2400 * MS,
            attributes={"http.request.method": "POST", "http.response.status_code": 200},
            status="ok",
        ),
        span(
            CHAT_ID,
            ROOT_ID,
            T0 + 620 * MS,
            T0 + 2350 * MS,
            name="chat gpt-4o",
            kind="client",
            attributes={
                "gen_ai.system": "openai",
                "gen_ai.usage.prompt_tokens": 1200,
                "gen_ai.usage.completion_tokens": 300,
                "gen_ai.request.temperature": 0.2,
                "gen_ai.response.finish_reasons": ("stop", "length"),
                "stream": True,
            },
            events=[("first_token", T0 + 980 * MS, {"gen_ai.response.chunk": 1})],
            status="error",
            message="upstream timeout",
        ),
        span(
            QUEUE_ID,
            ROOT_ID,
            T0 + 2360 * MS,
            T0 + 2361 * MS,
            name="queue publish",
            kind="producer",
            attributes={
                "messaging.system": "redis",
                "payload": b"\x01\xff",
                "routing": {"key": "jobs", "priority": 5},
            },
            service=None,  # on purpose
            resource={"host.name": "worker-1"},
            scope="jobs",
        ),
    ]


_TRACE = TRACE_ID.to_bytes(16, "big")
_API_ATTRIBUTES: dict[str, Any] = {"service.name": SERVICE, **RESOURCE}
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
