"""The details panel of one span: its place in the trace from the analysis, its attributes
and events from a read of that one span, each value cut to the display limit."""

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import NamedTuple

from apps.analysis.selectors import TraceAnalysis, WaterfallRow
from apps.analysis.spans import Span
from apps.analysis.stage_matching import TIME_TO_FIRST_CHUNK, first_token_ns
from apps.core.templatetags.figures import stage_class
from apps.core.time import ns_to_ms
from apps.ingest.decoding.numeric import DROPPED_ATTRIBUTES
from apps.ingest.selectors import ShownValue, SpanContent

# Reads one span's attributes and events by its id; None when the span is gone.
ContentLoader = Callable[[str], SpanContent | None]


class ValueRow(NamedTuple):
    key: str
    text: str  # the value, cut past the display limit
    length: int  # characters of the whole value
    cut: bool
    ignored: str  # why analysis ignores it; "" when it does not

    @property
    def length_text(self) -> str:
        return f"{self.length:,}"


@dataclass(frozen=True)
class EventDetails:
    name: str
    offset_ms: float | None  # after the span's start; None: no usable time
    attributes: list[ValueRow]


@dataclass(frozen=True)
class SpanDetails:
    """Everything about one span, for the details panel."""

    row: WaterfallRow
    stage_words: str  # where its time goes: "Retrieval", "no stage", "untracked", …
    why: str  # the rule that took it, or the span it inherited from
    stage_css: str
    duration_ms: float
    critical_ms: float
    offset_ms: float
    attributes: list[ValueRow]
    events: list[EventDetails]
    dropped: list[str]  # what ingestion dropped from the span, as noted on it
    shown: int  # attributes, events and their attributes listed, at most MAX_SHOWN_VALUES
    entries: int  # … of those the span holds
    display_chars: int

    @property
    def left_out(self) -> int:
        return self.entries - self.shown


def span_details(
    analysis: TraceAnalysis, row: WaterfallRow, content: SpanContent | None
) -> SpanDetails:
    span = row.span
    attributes = content.attributes if content is not None else []
    dropped = _dropped_notes(attributes)
    names = analysis.stage_names
    return SpanDetails(
        row=row,
        stage_words=row.reason.stage_words(names),
        why=row.reason.why(names),
        stage_css=stage_class(analysis.stage_index.get(row.reason.stage or "")),
        duration_ms=ns_to_ms(span.duration_ns),
        critical_ms=ns_to_ms(row.critical_ns),
        offset_ms=ns_to_ms(span.start_ns - analysis.root_start_ns),
        attributes=[
            _value_row(value, _ignored(span, value))
            for value in attributes
            if not (value.key == DROPPED_ATTRIBUTES and dropped)
        ],
        events=[
            EventDetails(
                name=event.name,
                offset_ms=(
                    None if event.time_ns is None else ns_to_ms(event.time_ns - span.start_ns)
                ),
                attributes=[_value_row(value) for value in event.attributes],
            )
            for event in (content.events if content is not None else [])
        ],
        dropped=dropped,
        shown=content.shown if content is not None else 0,
        entries=content.entries if content is not None else 0,
        display_chars=content.display_chars if content is not None else 0,
    )


def _value_row(value: ShownValue, ignored: str = "") -> ValueRow:
    return ValueRow(value.key, value.text, value.length, value.cut, ignored)


def _ignored(span: Span, value: ShownValue) -> str:
    """Why analysis ignores a span's attribute it would read; "" when it does not."""
    # Spans stored before ingestion checked this value may hold any number.
    if value.key == TIME_TO_FIRST_CHUNK:
        alone = replace(span, attributes={TIME_TO_FIRST_CHUNK: value.value}, events=())
        if not value.cut and first_token_ns(alone) is None:
            return "ignored: not a usable number of seconds"
    return ""


def _dropped_notes(attributes: list[ShownValue]) -> list[str]:
    for value in attributes:
        if value.key != DROPPED_ATTRIBUTES or value.cut:
            continue
        notes = value.value
        if isinstance(notes, list) and all(isinstance(note, str) for note in notes):
            return notes
    return []
