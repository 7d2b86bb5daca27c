"""OTLP/HTTP JSON: the proto3 JSON mapping of ExportTraceServiceRequest, with OTLP's
deviations (hex ids, integer enums), decoded into typed msgspec structs.

protobuf's json_format is not used: it reads ids as base64 and is several times slower.
Structural type errors and malformed int64 or bytes strings reject the whole body;
problems with one span's ids, name or times reject only that span; an int64 string
beyond 64 bits or a number analysis cannot use drops only that attribute.
"""

import binascii
from typing import Any

import msgspec
from django.conf import settings

from apps.ingest.decoding import otlp_json_types as t
from apps.ingest.decoding.errors import DecodeError
from apps.ingest.decoding.json_depth import json_depth_check
from apps.ingest.decoding.limits import spans_bounded
from apps.ingest.decoding.numeric import INT64_MAX, INT64_MIN, BigInteger, Drop, Problem
from apps.ingest.decoding.records import (
    KINDS,
    STATUSES,
    Attributes,
    DecodeResult,
    Reason,
    Rejections,
    SpanEvent,
    SpanRecord,
    attributes_settle,
    finite_or_text,
    parent_or_none,
    service_of,
    span_problem,
)

_decoder = msgspec.json.Decoder(t.Request)

_KIND_NAMES = {f"SPAN_KIND_{kind.upper()}": i for i, kind in enumerate(KINDS)}
_STATUS_NAMES = {f"STATUS_CODE_{status.upper()}": i for i, status in enumerate(STATUSES)}
# Wrong length on purpose: an id that is not valid hex fails the length checks.
_BAD_ID = b"?"


def decode_otlp_json(body: bytes) -> DecodeResult:
    json_depth_check(body)
    try:
        request = _decoder.decode(body)
        if not request.resource_spans and b'"resource_spans"' in body:
            request = msgspec.convert(_camel_keys(msgspec.json.decode(body)), t.Request)
    except msgspec.ValidationError as exc:
        raise DecodeError(f"invalid OTLP JSON: {exc}") from exc
    except msgspec.DecodeError as exc:
        raise DecodeError(f"malformed JSON: {exc}") from exc

    spans: list[SpanRecord] = []
    rejections = Rejections()
    index = -1
    for resource_index, resource_spans in enumerate(request.resource_spans or ()):
        resource_message = resource_spans.resource
        drops: list[Drop] = []
        resource = attributes_of(resource_message.attributes if resource_message else None, drops)
        if drops:
            rejections.drop(f"resource {resource_index}", drops)
        service = service_of(resource)
        for scope_spans in resource_spans.scope_spans or ():
            scope_name = (scope_spans.scope.name if scope_spans.scope else None) or ""
            for span in scope_spans.spans or ():
                index += 1
                drops = []
                record = _record(span, service, resource, scope_name, drops)
                if isinstance(record, str):
                    rejections.add(index, record)
                else:
                    spans.append(record)
                    if drops:
                        rejections.drop(f"span {index}", drops)
    return spans_bounded(spans, rejections)


def _record(
    span: t.Span, service: str, resource: Attributes, scope_name: str, drops: list[Drop]
) -> SpanRecord | str:
    trace_id = hex_id(span.trace_id, 16)
    span_id = hex_id(span.span_id, 8)
    parent_span_id = hex_id(span.parent_span_id, 8)
    name = span.name or ""
    start_ns = int64(span.start_time_unix_nano, "startTimeUnixNano")
    end_ns = int64(span.end_time_unix_nano, "endTimeUnixNano")
    problem = span_problem(trace_id, span_id, parent_span_id, name, start_ns, end_ns)
    if problem is not None:
        return problem
    kind = _enum(span.kind, _KIND_NAMES)
    if kind is None:
        return Reason.KIND
    status = span.status
    code = _enum(status.code, _STATUS_NAMES) if status else 0
    events = _events(span.events, drops) if span.events else []
    attributes = attributes_of(span.attributes, drops)
    attributes_settle(attributes, drops)
    return SpanRecord(
        trace_id,
        span_id,
        parent_or_none(parent_span_id),
        name,
        service,
        KINDS[kind] if 0 <= kind < len(KINDS) else "unspecified",
        start_ns,
        end_ns,
        STATUSES[code] if code is not None and 0 <= code < len(STATUSES) else "unset",
        (status.message if status else None) or "",
        attributes,
        resource,
        scope_name,
        events,
    )


def _events(events: list[t.Event], drops: list[Drop]) -> list[SpanEvent]:
    out = []
    for event in events:
        name = event.name or ""
        seen = len(drops)
        attributes = attributes_of(event.attributes, drops)
        if len(drops) > seen:
            drops[seen:] = [
                drop._replace(key=f"{drop.key} in event {name}") for drop in drops[seen:]
            ]
        out.append(SpanEvent(name, int64(event.time_unix_nano, "timeUnixNano"), attributes))
    return out


def hex_id(text: str | None, size: int) -> bytes:
    """Hex per OTLP; base64 is also read, as proto3 JSON writers other than OTLP's produce it."""
    if not text:
        return b""
    try:
        if len(text) == 2 * size:
            return bytes.fromhex(text)
        if len(text) == 4 * ((size + 2) // 3):
            return binascii.a2b_base64(text, strict_mode=True)
    except (ValueError, binascii.Error):
        pass
    return _BAD_ID


def int64(value: int | str | None, field: str) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    try:
        # int() alone would also take "1_000" and non-ASCII digits.
        if value.isascii() and "_" not in value:
            return int(value)
    except ValueError:
        pass
    raise DecodeError(f"invalid OTLP JSON: {field} {value[:40]!r} is not an integer")


def _enum(value: int | str | None, names: dict[str, int]) -> int | None:
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    return names.get(value)


def attributes_of(
    key_values: list[t.KeyValue] | None, drops: list[Drop], prefix: str = ""
) -> Attributes:
    """Values holding an integer beyond 64 bits are left out and added to ``drops``."""
    out: Attributes = {}
    for key_value in key_values or ():
        value = key_value.value
        if value is None:
            continue
        if value.string_value is not None:
            out[prefix + key_value.key] = value.string_value
        elif value.kvlist_value is not None and (
            # Over the key limit, the kvlist stays whole, as in otlp_attributes.
            len(prefix) + len(key_value.key) <= settings.INGEST_MAX_ATTRIBUTE_KEY_LENGTH
        ):
            out.update(attributes_of(value.kvlist_value.values, drops, f"{prefix}{key_value.key}."))
        else:
            try:
                converted = _value(value)
            except BigInteger as exc:
                drops.append(Drop(prefix + key_value.key, Problem.BIG_INTEGER, exc.value))
                continue
            if converted is not None:
                out[prefix + key_value.key] = converted
    return out


def _value(value: t.AnyValue) -> Any:
    """Raises BigInteger for an int64 string or number beyond 64 bits, anywhere inside."""
    if value.string_value is not None:
        return value.string_value
    if value.int_value is not None:
        number = int64(value.int_value, "intValue")
        if not INT64_MIN <= number <= INT64_MAX:
            raise BigInteger(number)
        return number
    if value.bool_value is not None:
        return value.bool_value
    if value.double_value is not None:
        return _double(value.double_value)
    if value.array_value is not None:
        return [_value(item) for item in value.array_value.values or ()]
    if value.kvlist_value is not None:
        # Only reached inside arrays, where a dotted key has nothing to hang on.
        items = value.kvlist_value.values or ()
        return {item.key: _value(item.value) if item.value else None for item in items}
    if value.bytes_value is not None:
        return _base64(value.bytes_value).hex()
    return None


def _double(value: float | str) -> float | str:
    try:
        return finite_or_text(float(value))
    except ValueError:
        raise DecodeError(f"invalid OTLP JSON: doubleValue {str(value)[:40]!r}") from None


def _base64(text: str) -> bytes:
    # proto3 JSON allows the URL-safe alphabet and missing padding.
    normal = text.replace("-", "+").replace("_", "/")
    try:
        return binascii.a2b_base64(normal + "=" * (-len(normal) % 4), strict_mode=True)
    # A str with a non-ASCII character raises a plain ValueError, not binascii.Error.
    except ValueError:
        raise DecodeError(f"invalid OTLP JSON: bytesValue {text[:40]!r} is not base64") from None


def _camel_keys(node: Any) -> Any:
    """The proto field names (snake_case) as the JSON names, for writers that use them."""
    if isinstance(node, dict):
        return {_camel(key): _camel_keys(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_camel_keys(item) for item in node]
    return node


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)
