"""What of a stored span a reader loads: its skeleton, and of its attributes and events
only what span rules and first-token detection read.

A span may hold a megabyte of attributes and a trace thousands of spans, while analysis
reads a handful of keys. Each span store applies the projection where the spans are
(PostgreSQL in SQL, ClickHouse as the rows arrive), so the rest is never held, and it
keeps analysis exact:

- an attribute a rule compares comes back when its value could equal what a rule wants:
  a string only when it is one of the texts the rules compare it with (strings compare
  exactly), a number or a boolean always (short as stored); lists and maps never match
  and stay behind;
- the ``seconds_keys`` (the first chunk's time and a serving engine's timings) as they
  are (a number, or a string that may be one);
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
from dataclasses import dataclass

from django.db import models

from apps.pipelines.models import Pipeline, SpanRule
from apps.pipelines.name_patterns import MAX_NAME_LENGTH


def _field_length(model: type[Pipeline] | type[SpanRule], name: str) -> int:
    field = model._meta.get_field(name)
    assert isinstance(field, models.CharField)
    assert field.max_length is not None
    return field.max_length


NAME_CHARS = MAX_NAME_LENGTH
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

# A projected span, in this order: its ids, name, service, kind, times, the projected
# attributes and events as JSON texts, status and status message.
PROJECTED_FIELDS = (
    "span_id", "parent_span_id", "name", "service", "kind", "start_ns", "end_ns",
    "attributes", "events", "status", "status_message",
)  # fmt: skip


@dataclass(frozen=True)
class SpanProjection:
    """The attribute keys and event names a reader needs from every span."""

    # Attribute key → the texts rules compare its value with.
    compared: dict[str, frozenset[str]]
    event_names: frozenset[str]
    # Keys whose values come back whatever they are (short strings, numbers, booleans).
    shown: frozenset[str] = frozenset()
    # Keys read as times in seconds, whatever the rules compare (numbers, or strings
    # that may be numbers).
    seconds_keys: tuple[str, ...] = ()

    def wanted(self) -> dict[str, list[str]]:
        """Every key read, with the texts its string values are compared with."""
        wanted = {key: sorted(texts) for key, texts in self.compared.items()}
        for key in (*self.seconds_keys, *sorted(self.shown)):
            wanted.setdefault(key, [])
        return wanted

    @property
    def params(self) -> dict[str, object]:
        """The projection as SQL parameters (see the PostgreSQL store)."""
        return {
            "wanted": json.dumps(self.wanted()),
            "seconds_keys": list(self.seconds_keys),
            "shown": sorted(self.shown),
            "event_names": sorted(self.event_names),
        }
