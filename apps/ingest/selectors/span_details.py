"""One stored span's attributes and events, for its details, within a size of their own.

A span may hold a megabyte of attributes; its details show each value up to
``TRACE_VALUE_DISPLAY_CHARS`` characters, cut past that with its full length stated,
and at most ``MAX_SHOWN_VALUES`` entries (the span's attributes, then each event with
its attributes). Values are cut where the spans are stored, so a request holds at most about
twice ``MAX_SHOWN_VALUES`` times ``TRACE_VALUE_DISPLAY_CHARS`` characters of them (keys are cut
at the same length), whatever the span stores.
"""

import json
import re
from dataclasses import dataclass
from typing import Any

import msgspec
from django.conf import settings

from apps.ingest.models import Trace
from apps.ingest.span_store import ContentRow, span_store

MAX_SHOWN_VALUES = 500
SPAN_HEX = re.compile(r"[0-9a-fA-F]{16}")


@dataclass(frozen=True)
class ShownValue:
    key: str
    # As stored; when cut, the first characters of its text (a string as it is, anything
    # else as JSON).
    value: Any
    length: int  # characters of its whole text
    cut: bool

    @property
    def text(self) -> str:
        return self.value if isinstance(self.value, str) else json.dumps(self.value)


@dataclass(frozen=True)
class ShownEvent:
    name: str
    time_ns: int | None  # None: the stored time is no number
    attributes: list[ShownValue]


@dataclass(frozen=True)
class SpanContent:
    start_ns: int
    attributes: list[ShownValue]
    events: list[ShownEvent]
    entries: int  # attributes, and events' attributes (or events without any), in all
    shown: int
    display_chars: int

    @property
    def left_out(self) -> int:
        return self.entries - self.shown


def span_content(*, trace: Trace, span_hex: str) -> SpanContent | None:
    """The attributes and events of the span ``span_hex`` of ``trace``; None when it has
    no such span (or the id is no span id)."""
    if not SPAN_HEX.fullmatch(span_hex):
        return None
    store = span_store()
    span_id = bytes.fromhex(span_hex)
    start_ns = store.span_start(trace, span_id)
    if start_ns is None:
        return None
    chars = settings.TRACE_VALUE_DISPLAY_CHARS
    rows = store.span_content(trace, span_id, start_ns, chars=chars, limit=MAX_SHOWN_VALUES)
    return _content(start_ns, rows, chars)


def _content(start_ns: int, rows: list[ContentRow], chars: int) -> SpanContent:
    decode = msgspec.json.decode
    attributes: list[ShownValue] = []
    events: dict[int, ShownEvent] = {}
    for entry, head, key, value, length, _ in rows:
        shown = None
        if key is not None and value is not None and length is not None:
            shown = ShownValue(key, decode(value), length, length > chars)
        if entry == 0:
            if shown is not None:
                attributes.append(shown)
            continue
        event = events.get(entry)
        if event is None:
            name, time_ns = decode(head or "[null, null]")
            event = events[entry] = ShownEvent(
                name=name if isinstance(name, str) else "",
                time_ns=time_ns if type(time_ns) is int else None,
                attributes=[],
            )
        if shown is not None:
            event.attributes.append(shown)
    return SpanContent(
        start_ns=start_ns,
        attributes=attributes,
        events=list(events.values()),
        entries=rows[0][5] if rows else 0,
        shown=len(rows),
        display_chars=chars,
    )
