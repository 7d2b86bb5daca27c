"""Accepted spans as rows of PostgreSQL's binary COPY format, written once by the request path.

The request path decodes every span anyway (to check it and report rejections).
Writing the rows there spares the worker a second decode and a Python pass per
span: it streams the stored rows of many batches into one COPY and leaves the
rest to SQL (trace ids to trace rows, duplicates, the span insert and the trace
counters, see ``span_writer``).

A row follows the tuple layout of PostgreSQL's binary COPY format: a 16-bit
field count, then per field a 32-bit length (-1 for NULL) and the value in the
type's binary form (big-endian integers, raw bytes, UTF-8 text, and ``jsonb`` as
a version byte 1 followed by JSON text). The stream's header and trailer are
added by the worker, which concatenates the rows of many batches.

PostgreSQL text and ``jsonb`` cannot hold the NUL character, which OpenTelemetry
strings may: it is replaced with U+FFFD here, so one such span can never make a
whole drain fail.
"""

import struct
from collections.abc import Iterable
from typing import Any

import msgspec

from apps.ingest.decoding.records import KINDS, STATUSES, SpanRecord

# The staging table's columns, in row order, and their PostgreSQL types.
STAGING_COLUMNS = (
    ("team_id", "int8"),
    ("trace_id", "bytea"),
    ("span_id", "bytea"),
    ("start_ns", "int8"),
    ("end_ns", "int8"),
    ("kind", "int2"),
    ("status", "int2"),
    ("parent_span_id", "bytea"),
    ("name", "text"),
    ("service", "text"),
    ("status_message", "text"),
    ("scope_name", "text"),
    ("attributes", "jsonb"),
    ("events", "jsonb"),
)
KIND_CODES = {name: code for code, name in enumerate(KINDS)}
STATUS_CODES = {name: code for code, name in enumerate(STATUSES)}

COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack("!ii", 0, 0)
COPY_TRAILER = struct.pack("!h", -1)

# The fixed-width fields lead, so one pack writes them: field count, team id, trace id,
# span id, start, end, kind and status, each value after its length.
_HEAD = struct.Struct("!hiqi16si8siqiqihih")
_PARENT = struct.Struct("!i8s")
_NULL = struct.pack("!i", -1)
_LENGTH = struct.Struct("!i")
_EMPTY_TEXT = _LENGTH.pack(0)
_NO_EVENTS = _LENGTH.pack(3) + b"\x01[]"
_EMPTY_OBJECT = _LENGTH.pack(3) + b"\x01{}"
# Names, services and scopes repeat from span to span: their encodings are kept.
_TEXT_CACHE_SIZE = 4096
_texts: dict[str, bytes] = {}
_json = msgspec.json.Encoder()
_ESCAPED_NUL = b"\\u0000"


def _text(value: str) -> bytes:
    if "\x00" in value:
        value = value.replace("\x00", "\ufffd")
    data = value.encode("utf-8", "replace")
    return _LENGTH.pack(len(data)) + data


def _repeated_text(value: str) -> bytes:
    data = _texts.get(value)
    if data is None:
        data = _text(value)
        if len(_texts) >= _TEXT_CACHE_SIZE:
            _texts.clear()
        _texts[value] = data
    return data


def _without_nul(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {_without_nul(k): _without_nul(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_nul(v) for v in value]
    return value


def _jsonb(value: Any) -> bytes:
    data = _json.encode(value)
    if _ESCAPED_NUL in data:  # rare: only then walk the value
        data = _json.encode(_without_nul(value))
    return _LENGTH.pack(len(data) + 1) + b"\x01" + data


def events_json(record: SpanRecord) -> list[dict[str, Any]]:
    """A span's events as stored: name, time and attributes when it has any."""
    return [
        {
            "name": e.name,
            "time_ns": e.time_ns,
            **({"attributes": e.attributes} if e.attributes else {}),
        }
        for e in record.events
    ]


def span_row(team_id: int, record: SpanRecord) -> bytes:
    """One span as a binary COPY tuple of ``STAGING_COLUMNS``."""
    parent = record.parent_span_id
    message = record.status_message
    head = _HEAD.pack(
        14, 8, team_id, 16, record.trace_id, 8, record.span_id, 8, record.start_ns,
        8, record.end_ns, 2, KIND_CODES.get(record.kind, 0), 2, STATUS_CODES.get(record.status, 0),
    )  # fmt: skip
    return b"".join(
        (
            head,
            _NULL if parent is None else _PARENT.pack(8, parent),
            _repeated_text(record.name),
            _repeated_text(record.service),
            _text(message) if message else _EMPTY_TEXT,
            _repeated_text(record.scope_name),
            _jsonb(record.attributes) if record.attributes else _EMPTY_OBJECT,
            _jsonb(events_json(record)) if record.events else _NO_EVENTS,
        )
    )


def span_rows(team_id: int, records: Iterable[SpanRecord]) -> bytes:
    """The records as concatenated binary COPY tuples (no header or trailer)."""
    return b"".join([span_row(team_id, record) for record in records])


# A span read back from its row, as a store other than PostgreSQL takes it: team id,
# trace id, span id, start, end, kind, status, parent span id (None for a root), then as
# UTF-8 its name, service, status message, scope name, and attributes and events as JSON.
DecodedRow = tuple[
    int, bytes, bytes, int, int, int, int, bytes | None, bytes, bytes, bytes, bytes, bytes, bytes
]
_TEXTS_AFTER_PARENT = 6


def span_rows_decode(payload: bytes) -> list[DecodedRow]:
    """The spans of concatenated rows (``span_rows``), back as tuples."""
    rows: list[DecodedRow] = []
    view = memoryview(payload)
    head_size = _HEAD.size
    unpack_head = _HEAD.unpack_from
    unpack_length = _LENGTH.unpack_from
    offset, end = 0, len(payload)
    while offset < end:
        head = unpack_head(view, offset)
        offset += head_size
        (length,) = unpack_length(view, offset)
        offset += 4
        parent = None
        if length >= 0:
            parent = bytes(view[offset : offset + length])
            offset += length
        texts = []
        for index in range(_TEXTS_AFTER_PARENT):
            (length,) = unpack_length(view, offset)
            offset += 4
            # jsonb values lead with their version byte
            skip = 1 if index >= 4 else 0
            texts.append(bytes(view[offset + skip : offset + length]))
            offset += length
        name, service, message, scope, attributes, events = texts
        rows.append(
            (head[2], head[4], head[6], head[8], head[10], head[12], head[14], parent,
             name, service, message, scope, attributes, events)
        )  # fmt: skip
    return rows
