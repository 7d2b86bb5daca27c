"""Geometry of the waterfall: every bar as CSS percentages of the trace's window.

A trace can hold thousands of spans, so a row carries only what it draws, every string
ready for the template; a span's fields and attributes are read for the one span whose
details are open (``span_details``), and the rows come a page at a time.
"""

from dataclasses import dataclass
from typing import NamedTuple

from apps.analysis.selectors import SpanPart, TraceAnalysis, WaterfallRow
from apps.analysis.stage_reasons import NO_STAGE_RULE, StageReason
from apps.core.figures import format_ms
from apps.core.templatetags.figures import stage_class
from apps.core.time import ns_to_ms
from apps.dashboards.views.span_details import ContentLoader, SpanDetails, span_details

TICKS = 5
MAX_INDENT = 24  # deeper spans stop moving right, so their names stay readable


# Rows and bars are tuples of plain strings, not dataclasses: the garbage collector stops
# tracking such tuples, so hundreds of rows add nothing to its next full pass, which on a
# big trace's page costs more than rendering them.


class Bar(NamedTuple):
    css: str  # classes, the stage's colour among them
    style: str  # position and width in the trace's window
    stage: str  # the stage's slug; "" for untracked
    title: str


class BarRow(NamedTuple):
    """One row, its numbers already text: a template prints a number many times slower."""

    span_id: str
    depth: str
    css: str  # "wf-row", then "error" and "on-path" where they apply
    indent: str
    name: str
    service: str
    error: str  # why a failed span failed, in its row: the first thing one looks for
    stage: str  # "Retrieval", "TTFT → Generation", "no stage", "untracked"
    stage_css: str  # the colour of the stage of its start
    why: str  # "rule 1", "inside retrieval", "no-stage rule 1", "no rule"
    reason: str  # the whole reason: "Retrieval — rule 1: name = retrieval"
    bars: tuple[Bar, ...]
    # Styles only, no titles: the details panel tells the span's time on the path, and a
    # title on each of a root's dozens of segments would weigh more than the row.
    critical: tuple[str, ...]
    duration: str  # "12.5 ms", as format_ms writes it


@dataclass(frozen=True)
class WaterfallPage:
    """The rows shown, from ``first``, and the span whose details are open, if any."""

    rows: list[BarRow]
    first: int
    size: int  # rows a page
    total: int  # rows the waterfall has, at most its limit
    span_total: int  # spans the trace has
    span: SpanDetails | None

    @property
    def truncated(self) -> bool:
        return self.span_total > self.total

    @property
    def last(self) -> int:
        return self.first + len(self.rows)

    @property
    def next(self) -> int | None:
        return self.last if self.last < self.total else None

    @property
    def next_count(self) -> int:
        return min(self.size, self.total - self.last)

    @property
    def previous(self) -> int | None:
        return max(0, self.first - self.size) if self.first else None

    @property
    def paged(self) -> bool:
        return self.total > self.size


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

    def style(self, start: int, end: int) -> str:
        left = (start - self.start) / self.length * 100
        width = max(0, end - start) / self.length * 100
        # Hundredths of a percent are under a pixel: more digits only weigh the page down.
        return f"left:{left:.2f}%;width:{width:.2f}%"


def _stage_label(stage: str | None) -> str:
    return stage if stage is not None else "untracked"


@dataclass(frozen=True)
class WaterfallAsk:
    """The rows and the span a URL asks for, as given: anything unreadable or unknown is
    ignored, so a stale or mistyped link shows the trace rather than an error."""

    rows: str | None
    span: str | None
    size: int  # rows a page
    limit: int  # rows the waterfall has at most

    @property
    def first(self) -> int | None:
        # Not isdigit: int() refuses "²"; and no thousands of digits for int() to read.
        if self.rows is None or not self.rows.isdecimal() or len(self.rows) > 9:
            return None
        return int(self.rows)

    @property
    def to_analyze(self) -> int:
        """How many rows in tree order the analysis must build for the page asked for.

        Building a row matches its span against the stages again; the rows after the
        page are only counted. A span is looked for among all of them.
        """
        if self.span:
            return self.limit
        return min(self.limit, (self.first or 0) + self.size)


def waterfall_page(
    analysis: TraceAnalysis, asked: WaterfallAsk, *, content: ContentLoader
) -> WaterfallPage:
    """``size`` rows from ``rows``, or else the page holding ``span``, or else the first;
    ``analysis`` holds the rows up to the page's end (``asked.to_analyze``), and
    ``content`` reads the attributes and events of the span asked for."""
    size, limit = asked.size, asked.limit
    total = min(analysis.span_total, limit) if analysis.rows else 0
    found = _find_row(analysis, asked.span)
    if asked.first is not None:
        first = min(asked.first, max(0, total - 1))
    elif found is not None:
        first = found[0] - found[0] % size
    else:
        first = 0
    return WaterfallPage(
        rows=waterfall_rows(analysis, start=first, stop=first + size),
        first=first,
        size=size,
        total=total,
        span_total=analysis.span_total,
        span=(
            span_details(analysis, found[1], content(found[1].span_id))
            if found is not None
            else None
        ),
    )


def _find_row(analysis: TraceAnalysis, span_id: str | None) -> tuple[int, WaterfallRow] | None:
    if not span_id:
        return None
    wanted = span_id.lower()
    for index, row in enumerate(analysis.rows):
        if row.span_id == wanted:
            return index, row
    return None


def waterfall_rows(
    analysis: TraceAnalysis, *, start: int = 0, stop: int | None = None
) -> list[BarRow]:
    scale = Scale(analysis)
    colours = analysis.stage_index
    names = analysis.stage_names
    rows = []
    for row in analysis.rows[start:stop]:
        span = row.span
        css = "wf-row"
        if span.status_error:
            css += " error"
        if row.critical:
            css += " on-path"
        rows.append(
            BarRow(
                span_id=row.span_id,
                depth=str(row.depth),
                css=css,
                indent=str(min(row.depth, MAX_INDENT)),
                name=span.name,
                service=span.service,
                error=row.status_message if span.status_error else "",
                stage=_stage_cell(row.reason, names),
                stage_css=stage_class(colours.get(row.reason.stage or "")),
                why=row.reason.short(),
                reason=row.reason.text(names),
                bars=tuple(_bar(part, scale, colours) for part in row.parts),
                critical=tuple(scale.style(seg.start_ns, seg.end_ns) for seg in row.critical),
                duration=format_ms(ns_to_ms(span.duration_ns)),
            )
        )
    return rows


def _stage_cell(reason: StageReason, names: dict[str, str]) -> str:
    if reason.kind == NO_STAGE_RULE:
        return "no stage"
    labels = (_stage_label(names.get(slug, slug) if slug else None) for slug in reason.stages)
    return " → ".join(labels)


def _bar(part: SpanPart, scale: Scale, colours: dict[str, int]) -> Bar:
    colour = colours.get(part.stage) if part.stage else None
    return Bar(
        css=f"wf-bar {stage_class(colour)}",
        style=scale.style(part.start_ns, part.end_ns),
        stage=part.stage or "",
        title=f"{_stage_label(part.stage)}: {format_ms(ns_to_ms(part.end_ns - part.start_ns))}",
    )


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
