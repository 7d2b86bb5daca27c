"""Geometry of the waterfall: every bar as CSS percentages of the trace's window."""

from dataclasses import dataclass, replace
from typing import Any

from apps.analysis.selectors import TraceAnalysis, WaterfallRow
from apps.analysis.spans import Span
from apps.analysis.stage_matching import TIME_TO_FIRST_CHUNK, first_token_ns
from apps.core.time import ns_to_ms
from apps.ingest.decoding.numeric import DROPPED_ATTRIBUTES

TICKS = 5
MAX_INDENT = 24  # deeper spans stop moving right, so their names stay readable


@dataclass(frozen=True)
class Bar:
    left: str
    width: str
    stage: str | None
    colour: int | None  # index of the stage among the pipeline's stages; None: untracked
    title: str


@dataclass(frozen=True)
class BarRow:
    row: WaterfallRow
    indent: int
    span_bar: Bar
    parts: list[Bar]
    critical: list[Bar]
    duration_ms: float
    critical_ms: float
    offset_ms: float
    # Not the dict: a template would read an attribute named "items" as the method.
    attributes: list[tuple[str, Any, str]]  # key, value, why analysis ignores it ("")
    dropped: list[str]  # what ingestion dropped from the span, as noted on it


@dataclass(frozen=True)
class Tick:
    left: str
    label_ms: float


class Scale:
    def __init__(self, analysis: TraceAnalysis) -> None:
        self.start = analysis.window_start_ns
        self.length = max(1, analysis.window_end_ns - analysis.window_start_ns)

    def left(self, ns: int) -> str:
        return f"{(ns - self.start) / self.length * 100:.3f}"

    def width(self, start: int, end: int) -> str:
        return f"{max(0, end - start) / self.length * 100:.3f}"


def _stage_label(stage: str | None) -> str:
    return stage if stage is not None else "untracked"


def waterfall_rows(analysis: TraceAnalysis) -> list[BarRow]:
    scale = Scale(analysis)
    colours = analysis.stage_index
    root_start = analysis.root_start_ns
    rows = []
    for row in analysis.rows:
        span = row.span
        rows.append(
            BarRow(
                row=row,
                indent=min(row.depth, MAX_INDENT),
                span_bar=Bar(
                    scale.left(span.start_ns),
                    scale.width(span.start_ns, span.stop_ns),
                    None,
                    None,
                    span.name,
                ),
                parts=[
                    Bar(
                        scale.left(part.start_ns),
                        scale.width(part.start_ns, part.end_ns),
                        part.stage,
                        colours.get(part.stage) if part.stage else None,
                        f"{_stage_label(part.stage)}: {ns_to_ms(part.end_ns - part.start_ns)} ms",
                    )
                    for part in row.parts
                ],
                critical=[
                    Bar(
                        scale.left(segment.start_ns),
                        scale.width(segment.start_ns, segment.end_ns),
                        segment.stage,
                        colours.get(segment.stage) if segment.stage else None,
                        f"critical path, {_stage_label(segment.stage)}: "
                        f"{ns_to_ms(segment.duration_ns)} ms",
                    )
                    for segment in row.critical
                ],
                duration_ms=ns_to_ms(span.duration_ns),
                critical_ms=ns_to_ms(row.critical_ns),
                offset_ms=ns_to_ms(span.start_ns - root_start),
                attributes=_attribute_rows(span),
                dropped=_dropped_notes(span),
            )
        )
    return rows


def _attribute_rows(span: Span) -> list[tuple[str, Any, str]]:
    rows = []
    for key, value in sorted(span.attributes.items()):
        if key == DROPPED_ATTRIBUTES and _dropped_notes(span):
            continue
        ignored = ""
        # Spans stored before ingestion checked this value may hold any number.
        if key == TIME_TO_FIRST_CHUNK and first_token_ns(replace(span, events=())) is None:
            ignored = "ignored: not a usable number of seconds"
        rows.append((key, value, ignored))
    return rows


def _dropped_notes(span: Span) -> list[str]:
    notes = span.attributes.get(DROPPED_ATTRIBUTES)
    if isinstance(notes, list) and all(isinstance(note, str) for note in notes):
        return notes
    return []


def ticks(analysis: TraceAnalysis) -> list[Tick]:
    scale = Scale(analysis)
    root_start = analysis.root_start_ns
    return [
        Tick(
            left=f"{i / (TICKS - 1) * 100:.3f}",
            label_ms=ns_to_ms(scale.start + scale.length * i // (TICKS - 1) - root_start),
        )
        for i in range(TICKS)
    ]
