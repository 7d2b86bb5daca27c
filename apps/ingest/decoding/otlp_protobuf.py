"""OTLP/HTTP binary protobuf: ExportTraceServiceRequest to span records.

The per-span loop touches each field once and avoids helper calls on the happy
path: decoding time is dominated by Python-side field access, not by upb parsing.
"""

from collections.abc import Iterable
from typing import Any

from google.protobuf.message import DecodeError as ProtobufDecodeError

from apps.ingest.decoding.errors import DecodeError
from apps.ingest.decoding.limits import spans_bounded
from apps.ingest.decoding.numeric import (
    DROPPED_ATTRIBUTES,
    NUMERIC_KEYS,
    Drop,
    drop_notes,
    unusable_numbers_drop,
)
from apps.ingest.decoding.otlp_attributes import Cache, read_attributes
from apps.ingest.decoding.otlp_schema import RawExportTraceServiceRequest
from apps.ingest.decoding.records import (
    GENAI_RENAMES,
    KINDS,
    MAX_TIME_NS,
    STATUSES,
    DecodeResult,
    Rejections,
    SpanEvent,
    SpanRecord,
    service_of,
    span_problem,
)

_ZERO_TRACE_ID = bytes(16)
_ZERO_SPAN_ID = bytes(8)


def decode_otlp_protobuf(body: bytes) -> DecodeResult:
    try:
        request = RawExportTraceServiceRequest.FromString(body)
        return _extract(request)
    except (ProtobufDecodeError, UnicodeDecodeError) as exc:
        raise DecodeError(f"invalid ExportTraceServiceRequest protobuf: {exc}") from exc


def _extract(request: Any) -> DecodeResult:
    spans: list[SpanRecord] = []
    append = spans.append
    rejections = Rejections()
    cache: Cache = {}
    index = -1
    for resource_spans in request.resource_spans:
        resource = read_attributes(resource_spans.resource.attributes, cache)
        service = service_of(resource)
        for scope_spans in resource_spans.scope_spans:
            scope_name = scope_spans.scope.name
            for span in scope_spans.spans:
                index += 1
                trace_id = span.trace_id
                span_id = span.span_id
                parent_span_id = span.parent_span_id
                name = span.name
                start_ns = span.start_time_unix_nano
                end_ns = span.end_time_unix_nano
                # Inlined copy of span_problem's happy path; it names the reason otherwise.
                if (
                    len(trace_id) != 16
                    or trace_id == _ZERO_TRACE_ID
                    or len(span_id) != 8
                    or span_id == _ZERO_SPAN_ID
                    or (parent_span_id and len(parent_span_id) != 8)
                    or not name
                    or not 0 < start_ns <= end_ns <= MAX_TIME_NS
                ):
                    problem = span_problem(
                        trace_id, span_id, parent_span_id, name, start_ns, end_ns
                    )
                    if problem is not None:
                        rejections.add(index, problem)
                        continue
                parent = (
                    parent_span_id if parent_span_id and parent_span_id != _ZERO_SPAN_ID else None
                )
                kind = span.kind
                status = span.status
                code = status.code
                attributes = read_attributes(span.attributes, cache)
                # Inlined attributes_settle; varints are int64 already, so only the
                # numeric keys need a look, and most spans have none of them.
                if not NUMERIC_KEYS.isdisjoint(attributes):
                    drops: list[Drop] = []
                    unusable_numbers_drop(attributes, drops)
                    if drops:
                        attributes[DROPPED_ATTRIBUTES] = drop_notes(drops)
                        rejections.drop(f"span {index}", drops)
                for old, new in GENAI_RENAMES:
                    if old in attributes and new not in attributes:
                        attributes[new] = attributes[old]
                events = span.events
                append(
                    SpanRecord(
                        trace_id,
                        span_id,
                        parent,
                        name,
                        service,
                        KINDS[kind] if 0 <= kind < 6 else "unspecified",
                        start_ns,
                        end_ns,
                        STATUSES[code] if 0 <= code < 3 else "unset",
                        status.message,
                        attributes,
                        resource,
                        scope_name,
                        _events(events, cache) if events else [],
                    )
                )
    return spans_bounded(spans, rejections)


def _events(events: Iterable[Any], cache: Cache) -> list[SpanEvent]:
    return [
        SpanEvent(event.name, event.time_unix_nano, read_attributes(event.attributes, cache))
        for event in events
    ]
