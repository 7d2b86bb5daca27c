"""What of a stored span a reader loads: its skeleton, and of its attributes and events
only what span rules and first-token detection read.

A span may hold a megabyte of attributes and a trace thousands of spans, while analysis
reads a handful of keys. The projection runs in SQL, so the rest never leaves the
database, and it keeps analysis exact:

- an attribute a rule compares comes back when its value could equal what a rule wants:
  a string only when it is one of the texts the rules compare it with (strings compare
  exactly, see ``attribute_text``), a number or a boolean always (short as stored);
  lists and maps never match and stay behind;
- ``gen_ai.response.time_to_first_chunk`` and a serving engine's timings
  (``apps.analysis.engine_timing``) as they are (a number, or a string that may be one):
  they place the first token and cut an LLM span into its engine's parts;
- events only when they are named as a first token, by name and time;
- for a reader that shows what a span is (the unmatched spans of a pipeline), the
  values of a few ``shown`` keys too: numbers and booleans, and strings up to
  ``SHOWN_VALUE_CHARS`` (a longer one stays behind rather than come back cut, which
  could equal a text a rule compares).

Names are cut to what name patterns look at (``MAX_NAME_LENGTH``), services to one
character more than a rule or a pipeline can name (a longer one still matches none),
and status messages to what a waterfall row shows.
"""

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from django.db import models

from apps.analysis.engine_timing import ENGINE_KEYS
from apps.analysis.stage_matching import (
    DEFAULT_FIRST_TOKEN_EVENT,
    TIME_TO_FIRST_CHUNK,
    WHOLE,
    CompiledRule,
)
from apps.pipelines.models import Pipeline, SpanRule
from apps.pipelines.name_patterns import MAX_NAME_LENGTH


def _field_length(model: type[Pipeline] | type[SpanRule], name: str) -> int:
    field = model._meta.get_field(name)
    assert isinstance(field, models.CharField)
    assert field.max_length is not None
    return field.max_length


SERVICE_CHARS = (
    max(_field_length(SpanRule, "service"), _field_length(Pipeline, "match_service")) + 1
)
STATUS_MESSAGE_CHARS = 500
# Numbers are stored as ingestion decoded them (64-bit integers, doubles): a longer text
# is no number a rule or the first token can use.
NUMBER_CHARS = 64
# Longest string value of a ``shown`` key a projection reads.
SHOWN_VALUE_CHARS = 200
# What a span weighs in a read besides its texts: its ids, times, kind and status, and
# the objects a reader holds it in (measured at about a kilobyte of Python objects a span,
# analysis included), so that a read's byte count follows the memory it takes.
SPAN_OBJECT_BYTES = 1024

# The attributes a projection reads, as one jsonb object per span. The span's attributes
# are walked once (each ``->`` would decompress a large value again); ``wanted`` maps a
# key to the texts its string values are compared with.
_ATTRIBUTES_SQL = f"""COALESCE((
    SELECT jsonb_object_agg(a.key, a.value)
    FROM jsonb_each(s.attributes) AS a
    JOIN jsonb_each(%(wanted)s::jsonb) AS w(key, texts) ON w.key = a.key
    WHERE CASE jsonb_typeof(a.value)
        WHEN 'string' THEN w.texts ? (a.value #>> '{{}}')
            OR a.key = ANY(%(seconds_keys)s::text[])
            OR (a.key = ANY(%(shown)s::text[])
                AND length(a.value #>> '{{}}') <= {SHOWN_VALUE_CHARS})
        WHEN 'number' THEN length(a.value::text) <= {NUMBER_CHARS}
        WHEN 'boolean' THEN true
        ELSE false
    END
), '{{}}'::jsonb)::text"""  # noqa: S608 - built from our own constants, no value
_EVENTS_SQL = """COALESCE((
    SELECT jsonb_agg(jsonb_build_object('name', e.event -> 'name', 'time_ns', e.event -> 'time_ns'))
    FROM jsonb_array_elements(s.events) AS e(event)
    WHERE e.event ->> 'name' = ANY(%(event_names)s::text[])
), '[]'::jsonb)::text"""


@dataclass(frozen=True)
class SpanProjection:
    """The attribute keys and event names a reader needs from every span."""

    # Attribute key → the texts rules compare its value with.
    compared: dict[str, frozenset[str]]
    event_names: frozenset[str]
    # Keys whose values come back whatever they are (short strings, numbers, booleans).
    shown: frozenset[str] = frozenset()

    @property
    def columns_sql(self) -> str:
        """The select list of a span ``s``, in ``PROJECTED_FIELDS`` order."""
        return (
            f"s.span_id, s.parent_span_id, left(s.name, {MAX_NAME_LENGTH}) AS name, "
            f"left(s.service, {SERVICE_CHARS}) AS service, s.kind, s.start_ns, s.end_ns, "
            f"{_ATTRIBUTES_SQL} AS attributes, {_EVENTS_SQL} AS events, s.status, "
            f"left(s.status_message, {STATUS_MESSAGE_CHARS}) AS status_message"
        )

    @property
    def params(self) -> dict[str, object]:
        wanted = {key: sorted(texts) for key, texts in self.compared.items()}
        for key in (*SECONDS_KEYS, *self.shown):
            wanted.setdefault(key, [])
        return {
            "wanted": json.dumps(wanted),
            "seconds_keys": list(SECONDS_KEYS),
            "shown": sorted(self.shown),
            "event_names": sorted(self.event_names),
        }


# Times in seconds that matching reads as numbers, whatever other keys the rules compare.
SECONDS_KEYS = (TIME_TO_FIRST_CHUNK, *ENGINE_KEYS)

PROJECTED_FIELDS = (
    "span_id", "parent_span_id", "name", "service", "kind", "start_ns", "end_ns",
    "attributes", "events", "status", "status_message",
)  # fmt: skip
# What a read weighs per span: the projected texts, and its objects.
READ_BYTES_SQL = (
    f"{SPAN_OBJECT_BYTES} + octet_length(name) + octet_length(service) "
    "+ octet_length(attributes) + octet_length(events) + octet_length(status_message)"
)


def span_projection(rules: Iterable[CompiledRule], *, shown: Iterable[str] = ()) -> SpanProjection:
    """What matching spans against ``rules`` (and finding their first tokens) reads, and
    the values of the ``shown`` keys."""
    compared: dict[str, set[str]] = defaultdict(set)
    event_names = {DEFAULT_FIRST_TOKEN_EVENT}
    for rule in rules:
        for key, text in rule.compared_texts:
            compared[key].add(text)
        if rule.portion != WHOLE:
            event_names.add(rule.first_token_event)
    return SpanProjection(
        compared={key: frozenset(texts) for key, texts in compared.items()},
        event_names=frozenset(event_names),
        shown=frozenset(shown),
    )
