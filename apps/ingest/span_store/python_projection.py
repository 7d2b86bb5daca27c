"""The projection and a span's details, applied in Python to whole stored spans.

For a store that cannot shape JSON where the spans are (ClickHouse keeps attributes and
events as text). It gives what the PostgreSQL store's SQL gives: the same attributes,
events and cut texts, and the same weights, so analysis and the pages read the same
thing from either store. JSON objects are written as PostgreSQL writes ``jsonb``
(``", "`` and ``": "`` between items, keys shortest first), which is what a read's bytes
are counted on.
"""

from typing import Any

import msgspec

from apps.ingest.span_store.base import ContentRow
from apps.ingest.span_store.projection import (
    NAME_CHARS,
    NUMBER_CHARS,
    SERVICE_CHARS,
    SHOWN_VALUE_CHARS,
    SPAN_OBJECT_BYTES,
    STATUS_MESSAGE_CHARS,
    SpanProjection,
)

_decode = msgspec.json.decode
_encode = msgspec.json.encode


def jsonb_text(value: Any) -> str:
    """``value`` as PostgreSQL prints a jsonb value."""
    if isinstance(value, dict):
        items = sorted(value.items(), key=lambda item: (len(item[0].encode()), item[0].encode()))
        return "{" + ", ".join(f"{jsonb_text(k)}: {jsonb_text(v)}" for k, v in items) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(jsonb_text(v) for v in value) + "]"
    return str(_encode(value), "utf-8")


class PythonProjection:
    """One projection, ready to apply to span after span."""

    def __init__(self, projection: SpanProjection) -> None:
        self.wanted = {key: frozenset(texts) for key, texts in projection.wanted().items()}
        self.seconds_keys = frozenset(projection.seconds_keys)
        self.shown = projection.shown
        self.event_names = projection.event_names

    def attributes(self, text: bytes) -> str:
        if text == b"{}":
            return "{}"
        attributes = _decode(text)
        if not isinstance(attributes, dict):
            # As PostgreSQL's jsonb_each refuses it: the read fails like analysis would.
            raise ValueError("a span's stored attributes are not a JSON object")
        kept = {}
        for key, texts in self.wanted.items():
            if key not in attributes:
                continue
            value = attributes[key]
            if self._keeps(key, texts, value):
                kept[key] = value
        return jsonb_text(kept) if kept else "{}"

    def _keeps(self, key: str, texts: frozenset[str], value: Any) -> bool:
        if isinstance(value, str):
            return (
                value in texts
                or key in self.seconds_keys
                or (key in self.shown and len(value) <= SHOWN_VALUE_CHARS)
            )
        if isinstance(value, bool):
            return True
        if isinstance(value, int | float):
            return len(_encode(value)) <= NUMBER_CHARS
        return False

    def events(self, text: bytes) -> str:
        if text == b"[]":
            return "[]"
        events = _decode(text)
        if not isinstance(events, list):
            raise ValueError("a span's stored events are not a JSON array")
        kept = [
            {"name": event.get("name"), "time_ns": event.get("time_ns")}
            for event in events
            if isinstance(event, dict) and _as_text(event.get("name")) in self.event_names
        ]
        return jsonb_text(kept) if kept else "[]"


def _as_text(value: Any) -> str | None:
    """What PostgreSQL's ``->>`` gives of a JSON value."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return jsonb_text(value)


def projected_texts(name: bytes, service: bytes, status_message: bytes) -> tuple[str, str, str]:
    """A span's name, service and status message, cut as a projected read cuts them."""
    return (
        name.decode()[:NAME_CHARS],
        service.decode()[:SERVICE_CHARS],
        status_message.decode()[:STATUS_MESSAGE_CHARS],
    )


def read_weight(name: str, service: str, attributes: str, events: str, message: str) -> int:
    """What a projected span weighs in a read: its texts' bytes, and its objects."""
    texts = (name, service, attributes, events, message)
    return SPAN_OBJECT_BYTES + sum(len(text.encode()) for text in texts)


def content_rows(
    attributes_text: bytes, events_text: bytes, *, chars: int, limit: int
) -> list[ContentRow]:
    """A span's details: its attributes (entry 0), then each event (entry n) with its name
    and time and one row an attribute (one row for an event without any); keys and
    texts cut to ``chars``, at most ``limit`` rows in (entry, key) order."""
    attributes = _decode(attributes_text)
    events = _decode(events_text)
    entries: list[tuple[int, str | None, str | None, Any]] = []  # entry, head, key, value
    if isinstance(attributes, dict):
        entries += [(0, None, key, value) for key, value in attributes.items()]
    for n, event in enumerate(events if isinstance(events, list) else [], start=1):
        name = event.get("name") if isinstance(event, dict) else None
        time_ns = event.get("time_ns") if isinstance(event, dict) else None
        name_text = _as_text(name)
        head = jsonb_text([None if name_text is None else name_text[:chars], time_ns])
        event_attributes = event.get("attributes") if isinstance(event, dict) else None
        if isinstance(event_attributes, dict) and event_attributes:
            entries += [(n, head, key, value) for key, value in event_attributes.items()]
        else:
            entries.append((n, head, None, None))
    # Keys in code point order, an event without attributes after any with (NULLS LAST).
    entries.sort(key=lambda e: (e[0], e[2] is None, e[2] or ""))
    total = len(entries)
    rows: list[ContentRow] = []
    for entry, shown_head, key, value in entries[:limit]:
        if key is None:
            rows.append((entry, shown_head, None, None, None, total))
            continue
        text = value if isinstance(value, str) else jsonb_text(value)
        shown = jsonb_text(value) if len(text) <= chars else jsonb_text(text[:chars])
        rows.append((entry, shown_head, key[:chars], shown, len(text), total))
    return rows
