"""One stored span's attributes and events, for its details, within a size of their own.

A span may hold a megabyte of attributes; its details show each value up to
``TRACE_VALUE_DISPLAY_CHARS`` characters, cut past that with its full length stated,
and at most ``MAX_SHOWN_VALUES`` entries (the span's attributes, then each event with
its attributes). Values are cut in SQL, so a request holds at most about
twice ``MAX_SHOWN_VALUES`` times ``TRACE_VALUE_DISPLAY_CHARS`` characters of them (keys are cut
at the same length), whatever the span stores.
"""

import json
import re
from dataclasses import dataclass
from typing import Any

import msgspec
from django.conf import settings
from django.db import connection

from apps.ingest.models import Span, Trace

MAX_SHOWN_VALUES = 500
SPAN_HEX = re.compile(r"[0-9a-fA-F]{16}")

# The copy kept when a span was stored twice is the one analysis keeps: ending last,
# then starting first (``unique_spans``).
_TABLE = Span._meta.db_table
_SPAN = """
    SELECT start_ns FROM "{table}"
    WHERE trace_pk = %(trace)s AND span_id = %(span)s {bounds}
    ORDER BY GREATEST(start_ns, end_ns) DESC, start_ns LIMIT 1
"""
# Entry 0 holds the span's attributes; entry n its n-th event, with its name and time,
# one row an attribute (or one row for an event without any). The texts are cut before
# they leave the database; ``count(*) OVER ()`` counts the rows the LIMIT leaves out.
_ENTRIES = """
    WITH span AS MATERIALIZED (
        SELECT attributes, events FROM "{table}"
        WHERE trace_pk = %(trace)s AND span_id = %(span)s AND start_ns = %(start)s
    ), entries AS (
        SELECT 0 AS entry, NULL::jsonb AS head, a.key, a.value
        FROM span, jsonb_each(
            CASE jsonb_typeof(span.attributes) WHEN 'object' THEN span.attributes END
        ) AS a
        UNION ALL
        SELECT e.n, jsonb_build_array(left(e.event ->> 'name', %(chars)s), e.event -> 'time_ns'),
            ea.key, ea.value
        FROM span
        CROSS JOIN LATERAL jsonb_array_elements(
            CASE jsonb_typeof(span.events) WHEN 'array' THEN span.events ELSE '[]' END
        ) WITH ORDINALITY AS e(event, n)
        LEFT JOIN LATERAL jsonb_each(
            CASE jsonb_typeof(e.event -> 'attributes')
                WHEN 'object' THEN e.event -> 'attributes' ELSE '{}' END
        ) AS ea ON true
    ), texts AS (
        SELECT entry, head, key, value,
            CASE jsonb_typeof(value) WHEN 'string' THEN value #>> '{}' ELSE value::text END
                AS text
        FROM entries
    )
    SELECT entry, head::text, left(key, %(chars)s),
        CASE WHEN length(text) <= %(chars)s THEN value
            ELSE to_jsonb(left(text, %(chars)s)) END::text,
        length(text), count(*) OVER ()
    FROM texts ORDER BY entry, key LIMIT %(limit)s
""".replace("{table}", Span._meta.db_table)


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
    params: dict[str, Any] = {"trace": trace.pk, "span": bytes.fromhex(span_hex)}
    bounds = ""
    if trace.first_span_start_ns is not None and trace.last_span_start_ns is not None:
        # The day partitions that can hold the trace's spans, not every day kept.
        bounds = "AND start_ns BETWEEN %(first)s AND %(last)s"
        params |= {"first": trace.first_span_start_ns, "last": trace.last_span_start_ns}
    with connection.cursor() as cursor:
        cursor.execute(_SPAN.format(table=_TABLE, bounds=bounds), params)
        found = cursor.fetchone()
        if found is None:
            return None
        chars = settings.TRACE_VALUE_DISPLAY_CHARS
        params |= {"start": found[0], "chars": chars, "limit": MAX_SHOWN_VALUES}
        cursor.execute(_ENTRIES, params)
        rows = cursor.fetchall()
    return _content(found[0], rows, chars)


def _content(start_ns: int, rows: list[tuple[Any, ...]], chars: int) -> SpanContent:
    decode = msgspec.json.decode
    attributes: list[ShownValue] = []
    events: dict[int, ShownEvent] = {}
    for entry, head, key, value, length, _ in rows:
        shown = None
        if key is not None:
            shown = ShownValue(key, decode(value), length, length > chars)
        if entry == 0:
            if shown is not None:
                attributes.append(shown)
            continue
        event = events.get(entry)
        if event is None:
            name, time_ns = decode(head)
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
