"""One builder for the spans that tests analyse and send through ingestion.

``span`` makes a ``HandSpan``: the span shape trace analysis works on, so critical
path, matching and attribution take it as it is, plus what only the wire carries
(trace id, resource, scope, status and its message, event attributes). Integer ids
become the hex strings that stored spans are analysed under; string ids ("root",
"a") suit analysis alone, as no wire format can carry them.

The encodings sit on top of it: ``encode`` gives an OTLP/protobuf export request,
``otlp_json`` the OTLP/JSON one, and ``sdk_span`` the OpenTelemetry SDK span an
exporter holds.
"""

import base64
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from apps.analysis.spans import Span
from tests.timing import MS

TRACE_ID = 0x5B8EFFF798038103D269B633813FC60C
T0 = 1_760_000_000_000_000_000  # 2025-10-09T08:53:20Z
SERVICE = "chat-api"
# The resource attributes besides service.name that a span has unless a test says otherwise.
RESOURCE: Mapping[str, Any] = {"deployment.environment.name": "test", "process.pid": 4242}
SCOPE = "chat.instrumentation"
# What decoding calls the service of a resource without service.name.
UNKNOWN_SERVICE = "unknown_service"

# (name, time_ns) or (name, time_ns, attributes).
EventSpec = tuple[str, int] | tuple[str, int, Mapping[str, Any]]
StatusName = Literal["unset", "ok", "error"]


@dataclass(slots=True)
class HandSpan(Span):
    """An analysis span that also knows how it travels: ``resource`` holds every
    resource attribute, service.name included; ``event_attributes`` go with ``events``
    in order."""

    trace_id: int = TRACE_ID
    resource: Mapping[str, Any] = field(default_factory=dict)
    scope: str = SCOPE
    status: StatusName = "unset"
    status_message: str = ""
    event_attributes: tuple[Mapping[str, Any], ...] = ()


def span(
    span_id: int | str,
    parent_id: int | str | None = None,
    start: int = T0,
    end: int | None = None,
    *,
    name: str | None = None,
    kind: str = "internal",
    service: str | None = SERVICE,
    resource: Mapping[str, Any] = RESOURCE,
    attributes: dict[str, Any] | None = None,
    events: Iterable[EventSpec] = (),
    status: StatusName = "unset",
    message: str = "",
    scope: str = SCOPE,
    trace_id: int = TRACE_ID,
) -> HandSpan:
    """One span; times are epoch nanoseconds, ``end`` a millisecond after ``start``
    unless given, and ``name`` the span id unless given. ``kind`` is spelled as
    analysis reads it ("server", "client"); ``service`` None leaves service.name out of
    the resource; ``message`` is the status message."""
    own_id = _hex_id(span_id)
    full_events = [_event(event) for event in events]
    return HandSpan(
        span_id=own_id,
        parent_id=None if parent_id is None else _hex_id(parent_id),
        name=own_id if name is None else name,
        service=UNKNOWN_SERVICE if service is None else service,
        kind=kind,
        start_ns=start,
        end_ns=start + MS if end is None else end,
        attributes=attributes or {},
        events=tuple((event_name, time_ns) for event_name, time_ns, _ in full_events),
        status_error=status == "error",
        trace_id=trace_id,
        resource=({} if service is None else {"service.name": service}) | dict(resource),
        scope=scope,
        status=status,
        status_message=message,
        event_attributes=tuple(event_attributes for _, _, event_attributes in full_events),
    )


def _hex_id(span_id: int | str) -> str:
    return span_id if isinstance(span_id, str) else f"{span_id:016x}"


def _event(event: EventSpec) -> tuple[str, int, Mapping[str, Any]]:
    if len(event) == 2:
        return event[0], event[1], {}
    return event[0], event[1], event[2]


# The span ids of ``rag_spans``.
ROOT, AUTH, RETR_A, RETR_B, LLM = 0x10, 0x20, 0x30, 0x31, 0x40


def rag_spans(trace_id: int = TRACE_ID, t0: int = T0, *, llm_error: bool = False) -> list[HandSpan]:
    """Root 0-1000 ms: auth 0-50, parallel retrievals 50-200 and 50-300, an LLM call
    300-950 whose first token comes at 500 ms (an event)."""
    return [
        span(ROOT, None, t0, t0 + 1000 * MS, name="POST /chat", kind="server",
             trace_id=trace_id),
        span(AUTH, ROOT, t0, t0 + 50 * MS, name="auth.check", trace_id=trace_id),
        span(RETR_A, ROOT, t0 + 50 * MS, t0 + 200 * MS, name="vector.search a",
             trace_id=trace_id),
        span(RETR_B, ROOT, t0 + 50 * MS, t0 + 300 * MS, name="vector.search b",
             trace_id=trace_id),
        span(LLM, ROOT, t0 + 300 * MS, t0 + 950 * MS, name="chat gpt-4o", kind="client",
             attributes={"gen_ai.operation.name": "chat"},
             events=[("first_token", t0 + 500 * MS)],
             status="error" if llm_error else "unset",
             message="upstream timeout" if llm_error else "", trace_id=trace_id),
    ]  # fmt: skip


def retrieval_request(
    trace_id: int, t0: int, *, retrieval_ms: int = 200, root: str = "POST /chat"
) -> list[HandSpan]:
    """A server span whose one child retrieves documents, then 100 ms of its own."""
    return [
        span(0x10, None, t0, t0 + (retrieval_ms + 100) * MS, name=root, kind="server",
             trace_id=trace_id),
        span(0x20, 0x10, t0, t0 + retrieval_ms * MS, name="retrieve docs", trace_id=trace_id),
    ]  # fmt: skip


def sdk_span(hand: HandSpan) -> ReadableSpan:
    """The span as the OpenTelemetry SDK holds it once ended."""
    return ReadableSpan(
        name=hand.name,
        context=_context(hand.span_id, hand.trace_id),
        parent=None if hand.parent_id is None else _context(hand.parent_id, hand.trace_id),
        resource=Resource(dict(hand.resource)),
        attributes=hand.attributes,
        events=tuple(
            Event(name, dict(attributes), time_ns)
            for (name, time_ns), attributes in zip(hand.events, hand.event_attributes, strict=True)
        ),
        kind=SpanKind[hand.kind.upper().removeprefix("SPAN_KIND_")],
        status=Status(StatusCode[hand.status.upper()], hand.status_message or None),
        start_time=hand.start_ns,
        end_time=hand.end_ns,
        instrumentation_scope=InstrumentationScope(hand.scope, "1.0.0"),
    )


def _context(span_id: str, trace_id: int) -> SpanContext:
    return SpanContext(trace_id, int(span_id, 16), is_remote=False, trace_flags=TraceFlags(1))


def encode(spans: Iterable[HandSpan | ReadableSpan]) -> bytes:
    """An OTLP/protobuf export request; SDK spans (from a real tracer) go in as they are."""
    return encode_spans(
        [sdk_span(s) if isinstance(s, HandSpan) else s for s in spans]
    ).SerializeToString()


def otlp_json(spans: Iterable[HandSpan]) -> bytes:
    """The OTLP/JSON export request: protobuf's JSON mapping with integer enums and,
    as OTLP/JSON requires, ids in hex rather than base64."""
    request = MessageToDict(encode_spans([sdk_span(s) for s in spans]), use_integers_for_enums=True)
    for resource_spans in request.get("resourceSpans", []):
        for scope_spans in resource_spans.get("scopeSpans", []):
            for wire in scope_spans.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in wire:
                        wire[key] = base64.b64decode(wire[key]).hex()
    return json.dumps(request).encode()


# The span ids of ``ask_spans``.
ASK, ASK_RETRIEVAL, ASK_EMBED, ASK_QUERY, ASK_RERANK, ASK_CHAT = 0x50, 0x51, 0x52, 0x53, 0x54, 0x55
QDRANT: Mapping[str, Any] = {"db.system.name": "qdrant", "db.operation.name": "query"}


def ask_spans(
    trace_id: int = TRACE_ID,
    t0: int = T0,
    *,
    store: Mapping[str, Any] = QDRANT,
    retrieval_ms: int = 190,
    rerank_ms: int = 125,
    answer_ms: int = 1155,
    first_chunk_s: float = 0.4,
) -> list[HandSpan]:
    """An ordinary RAG app instrumented with the OpenTelemetry SDK, no AI library:
    ``POST /ask`` 0-1500 ms; ``retrieval`` 10-200 ms holding an embeddings call 10-50
    and a ``query docs`` database span 55-200 (``store`` its attributes); ``rerank``
    205-330; ``chat gpt-4o-mini`` 335-1490 with its first chunk 0.4 s in; the request
    ends 10 ms after the answer. The durations given move what follows them."""
    chat = {
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o-mini", "gen_ai.usage.input_tokens": 812,
        "gen_ai.usage.output_tokens": 164, "gen_ai.response.time_to_first_chunk": first_chunk_s,
    }  # fmt: skip
    embed = {"gen_ai.operation.name": "embeddings", "gen_ai.provider.name": "openai",
             "gen_ai.request.model": "text-embedding-3-small"}  # fmt: skip
    retrieved = t0 + (10 + retrieval_ms) * MS
    reranked = retrieved + (5 + rerank_ms) * MS
    answered = reranked + (5 + answer_ms) * MS
    return [
        span(ASK, None, t0, answered + 10 * MS, name="POST /ask", kind="server",
             trace_id=trace_id),
        span(ASK_RETRIEVAL, ASK, t0 + 10 * MS, retrieved, name="retrieval",
             trace_id=trace_id),
        span(ASK_EMBED, ASK_RETRIEVAL, t0 + 10 * MS, t0 + 50 * MS,
             name="embeddings text-embedding-3-small", kind="client", attributes=embed,
             trace_id=trace_id),
        span(ASK_QUERY, ASK_RETRIEVAL, t0 + 55 * MS, retrieved, name="query docs",
             kind="client", attributes=dict(store), trace_id=trace_id),
        span(ASK_RERANK, ASK, retrieved + 5 * MS, reranked, name="rerank", trace_id=trace_id),
        span(ASK_CHAT, ASK, reranked + 5 * MS, answered, name="chat gpt-4o-mini",
             kind="client", attributes=chat, trace_id=trace_id),
    ]  # fmt: skip
