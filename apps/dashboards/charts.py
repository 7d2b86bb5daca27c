"""Geometry of the server-rendered SVG charts: scales, paths, bars and downsampling.

Templates draw what these functions compute; nothing here knows HTML. Coordinates
are in the SVG's user units, which the page scales to its width. A chart never has
more points than its plot has pixel columns: a longer series is cut into columns
and each column keeps its largest value, so a latency spike is never averaged away.
"""

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from apps.core.figures import format_ms
from apps.core.time import to_datetime


def nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 x 10^k at least ``value`` (a round top for an axis)."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if step * power >= value * (1 - 1e-12):
            return step * power
    return 10 * power


@dataclass(frozen=True)
class TimedValue:
    """One point of a series: bucket start (epoch seconds), value (ms) and sample count."""

    start: int
    value: float | None
    count: int


def downsample_max(points: Sequence[TimedValue], columns: int) -> list[TimedValue]:
    """At most ``columns`` points, each the largest value of its column (counts summed)."""
    if columns <= 0 or len(points) <= columns:
        return list(points)
    per_column = math.ceil(len(points) / columns)
    result = []
    for first in range(0, len(points), per_column):
        group = points[first : first + per_column]
        values = [p.value for p in group if p.value is not None]
        result.append(
            TimedValue(
                start=group[0].start,
                value=max(values) if values else None,
                count=sum(p.count for p in group),
            )
        )
    return result


def _path(points: Sequence[tuple[float, float] | None]) -> str:
    """An SVG path through the points, broken where a point is None. A point alone between
    gaps gets a zero-length segment, which the round line cap draws as a dot."""
    commands: list[str] = []
    run = 0
    for point in [*points, None]:
        if point is None:
            if run == 1:
                commands.append("l0,0")
            run = 0
            continue
        commands.append(f"{'L' if run else 'M'}{point[0]},{point[1]}")
        run += 1
    return " ".join(commands)


@dataclass(frozen=True)
class Tick:
    position: float
    label: str


@dataclass(frozen=True)
class Marker:
    """A point drawn with its exact value as a tooltip."""

    x: float
    y: float
    title: str


@dataclass(frozen=True)
class Band:
    """A shaded stretch of the time axis (a violation), with what it was."""

    x: float
    width: float
    title: str


@dataclass(frozen=True)
class Plot:
    width: int
    height: int
    left: int = 56
    right: int = 12
    top: int = 12
    bottom: int = 26

    @property
    def inner_width(self) -> int:
        return self.width - self.left - self.right

    @property
    def inner_height(self) -> int:
        return self.height - self.top - self.bottom

    @property
    def baseline(self) -> int:
        return self.height - self.bottom


@dataclass(frozen=True)
class LineChart:
    plot: Plot
    path: str
    markers: list[Marker]
    y_ticks: list[Tick]
    x_ticks: list[Tick]
    budget_y: float | None = None
    budget_label: str = ""
    bands: list[Band] = field(default_factory=list)
    empty: bool = False


def _time_label(seconds: int, span: int) -> str:
    moment = to_datetime(seconds)
    if span <= 2 * 86400:
        return moment.strftime("%H:%M")
    return moment.strftime("%b %d")


def _time_ticks(start: int, end: int, plot: Plot, count: int = 6) -> list[Tick]:
    span = max(end - start, 1)
    steps = (60, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 2 * 86400,
             7 * 86400)  # fmt: skip
    step = next((s for s in steps if span / s <= count), 7 * 86400)
    first = -(-start // step) * step
    return [
        Tick(plot.left + (moment - start) / span * plot.inner_width, _time_label(moment, span))
        for moment in range(first, end + 1, step)
    ]


def line_chart(
    points: Sequence[TimedValue],
    *,
    start: int,
    end: int,
    step: int,
    budget_ms: float | None = None,
    budget_label: str = "budget",
    bands: Sequence[tuple[int, int, str]] = (),
    width: int = 720,
    height: int = 220,
    label: str = "",
    value_format: Callable[[float], str] = format_ms,
) -> LineChart:
    """A latency line over ``[start, end)`` with its budget line and shaded periods.

    ``points`` start every ``step`` seconds; a point without samples breaks the line.
    ``bands`` are (start, end, title) periods in epoch seconds. ``value_format`` writes
    the values of a line that is not of milliseconds.
    """
    plot = Plot(width=width, height=height)
    points = downsample_max(points, plot.inner_width)
    values = [p.value for p in points if p.value is not None]
    top = nice_ceiling(max([*values, budget_ms or 0, 1.0]) * 1.08)
    span = max(end - start, 1)

    def x_of(moment: float) -> float:
        return round(
            plot.left + (min(max(moment, start), end) - start) / span * plot.inner_width, 1
        )

    def y_of(value: float) -> float:
        return round(plot.baseline - value / top * plot.inner_height, 1)

    # Each point is drawn at the middle of the time it covers (several steps once merged).
    column = points[1].start - points[0].start if len(points) > 1 else step
    placed: list[tuple[float, float] | None] = []
    markers: list[Marker] = []
    for point in points:
        if point.value is None:
            placed.append(None)
            continue
        x, y = x_of(point.start + column / 2), y_of(point.value)
        placed.append((x, y))
        when = to_datetime(point.start).strftime("%Y-%m-%d %H:%M:%S UTC")
        samples = f"{point.count} sample{'s' if point.count != 1 else ''}"
        title = f"{label} {value_format(point.value)}".strip()
        markers.append(Marker(x, y, f"{title} at {when} ({samples})"))
    y_ticks = [
        Tick(y_of(top * share), value_format(top * share)) for share in (0, 0.25, 0.5, 0.75, 1)
    ]
    shaded = [
        Band(x_of(low), max(x_of(high) - x_of(low), 1.0), title)
        for low, high, title in bands
        if high > start and low < end
    ]
    return LineChart(
        plot=plot,
        path=_path(placed),
        markers=markers,
        y_ticks=y_ticks,
        x_ticks=_time_ticks(start, end, plot),
        budget_y=y_of(budget_ms) if budget_ms else None,
        budget_label=f"{budget_label} {format_ms(budget_ms)}" if budget_ms else "",
        bands=shaded,
        empty=not values,
    )


@dataclass(frozen=True)
class Sparkline:
    width: int
    height: int
    path: str
    budget_y: float | None
    title: str
    empty: bool


def sparkline(
    points: Sequence[TimedValue],
    *,
    budget_ms: float | None,
    width: int = 120,
    height: int = 28,
    title: str = "",
) -> Sparkline:
    points = downsample_max(points, width)
    values = [p.value for p in points if p.value is not None]
    top = max([*values, budget_ms or 0, 1.0]) * 1.1
    count = max(len(points) - 1, 1)
    placed: list[tuple[float, float] | None] = []
    for number, point in enumerate(points):
        if point.value is None:
            placed.append(None)
            continue
        x = round(number / count * (width - 2) + 1, 1)
        y = round(height - 1 - point.value / top * (height - 2), 1)
        placed.append((x, y))
    budget_y = round(height - 1 - budget_ms / top * (height - 2), 1) if budget_ms else None
    return Sparkline(width, height, _path(placed), budget_y, title, not values)


@dataclass(frozen=True)
class Segment:
    """One part of a stacked bar: its share of the whole, placed in percent of the width."""

    key: str
    label: str
    value: float
    fraction: float
    x: float
    width: float
    colour: str
    title: str


def stacked_bar(parts: Sequence[tuple[str, str, float, str, str]]) -> list[Segment]:
    """Parts as (key, label, value, colour class, tooltip) laid out in percent of the bar.

    Negative or missing values count as nothing; an all-zero bar has no segments.
    """
    total = sum(max(value, 0.0) for _, _, value, _, _ in parts)
    if total <= 0:
        return []
    segments = []
    x = 0.0
    for key, label, value, colour, title in parts:
        fraction = max(value, 0.0) / total
        if fraction <= 0:
            continue
        width = fraction * 100
        segments.append(Segment(key, label, value, fraction, round(x, 3), round(width, 3),
                                colour, title))  # fmt: skip
        x += width
    return segments


@dataclass(frozen=True)
class HistogramBar:
    x: float
    y: float
    width: float
    height: float
    title: str


@dataclass(frozen=True)
class Mark:
    """A vertical line at a value, labelled "p95 412 ms"; a label near the right edge
    reads leftwards so that it stays inside the chart."""

    position: float
    label: str
    leftwards: bool = False


@dataclass(frozen=True)
class Histogram:
    plot: Plot
    bars: list[HistogramBar]
    marks: list[Mark]
    x_ticks: list[Tick]
    empty: bool


def _log_ticks(low: float, high: float) -> list[float]:
    """1, 2 and 5 times each power of ten between ``low`` and ``high``."""
    ticks = []
    for power in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1):
        for step in (1, 2, 5):
            value = step * 10.0**power
            if low <= value <= high:
                ticks.append(value)
    return ticks


def histogram(
    bins: Sequence[tuple[float, float, int]],
    *,
    marks: Sequence[tuple[str, float | None]] = (),
    budget_ms: float | None = None,
    width: int = 720,
    height: int = 220,
) -> Histogram:
    """Bars for (low ms, high ms, count) bins on a logarithmic time axis, with marks.

    The axis is logarithmic because latency spans decades: a 5 ms cache hit and a 5 s
    miss both stay visible. Marks are labelled above the plot, one row each, so that
    close percentiles do not write over each other.
    """
    values = [(name, value) for name, value in marks if value]
    if budget_ms:
        values.append(("budget", float(budget_ms)))
    plot = Plot(width=width, height=height, left=16, right=16, top=14 + 14 * len(values))
    bins = [b for b in bins if b[2] > 0 and b[1] > 0]
    if not bins:
        return Histogram(plot, [], [], [], empty=True)
    positive = [b[0] for b in bins if b[0] > 0]
    low = min(positive) if positive else bins[0][1] / 2
    high = max([b[1] for b in bins] + [v for _, v in values])
    log_low, log_high = math.log10(low), math.log10(high * 1.05)
    spread = max(log_high - log_low, 1e-9)

    def x_of(value: float) -> float:
        value = max(value, low)
        return round(plot.left + (math.log10(value) - log_low) / spread * plot.inner_width, 1)

    tallest = max(b[2] for b in bins)
    total = sum(b[2] for b in bins)
    bars = []
    for lower, upper, count in bins:
        x0, x1 = x_of(max(lower, low)), x_of(upper)
        bar_height = count / tallest * plot.inner_height
        share = count / total
        title = f"{format_ms(lower)} to {format_ms(upper)}: {count} ({share * 100:.1f} %)"
        bars.append(HistogramBar(x0, round(plot.baseline - bar_height, 1), max(x1 - x0, 1.0),
                                 round(bar_height, 1), title))  # fmt: skip
    marks_out = []
    for name, value in values:
        x = x_of(value)
        marks_out.append(Mark(x, f"{name} {format_ms(value)}", x > plot.width * 0.75))
    x_ticks = [Tick(x_of(v), format_ms(v)) for v in _log_ticks(low, high * 1.05)]
    return Histogram(plot, bars, marks_out, x_ticks, empty=False)


@dataclass(frozen=True)
class ShareColumn:
    x: float
    y: float
    width: float
    height: float
    colour: str
    title: str


@dataclass(frozen=True)
class ShareChart:
    """Columns of shares of one whole (models' shares of a stage's requests) over time."""

    plot: Plot
    columns: list[ShareColumn]
    y_ticks: list[Tick]
    x_ticks: list[Tick]
    legend: list[tuple[str, str]]  # (colour, label)
    empty: bool


def share_chart(
    starts: Sequence[int],
    series: Sequence[tuple[str, Sequence[float | None]]],
    *,
    start: int,
    end: int,
    step: int,
    colours: Sequence[str],
    width: int = 720,
    height: int = 180,
) -> ShareChart:
    """One column per point, each series' share stacked from the bottom; ``series`` are
    (label, shares per point), a point without samples is left empty."""
    plot = Plot(width=width, height=height)
    span = max(end - start, 1)
    column_width = max(step / span * plot.inner_width - 1, 0.5)
    columns = []
    for number, point in enumerate(starts):
        x = plot.left + (max(point, start) - start) / span * plot.inner_width
        bottom = float(plot.baseline)
        when = to_datetime(point).strftime("%Y-%m-%d %H:%M UTC")
        for (label, shares), colour in zip(series, colours, strict=False):
            share = shares[number]
            if not share:
                continue
            tall = share * plot.inner_height
            bottom -= tall
            columns.append(
                ShareColumn(
                    round(x, 1), round(bottom, 1), round(column_width, 1), round(tall, 1),
                    colour, f"{label}: {share * 100:.1f} % at {when}",
                )
            )  # fmt: skip
    y_ticks = [
        Tick(plot.baseline - share * plot.inner_height, f"{share * 100:.0f} %")
        for share in (0, 0.5, 1)
    ]
    legend = [(colour, label) for (label, _), colour in zip(series, colours, strict=False)]
    return ShareChart(plot, columns, y_ticks, _time_ticks(start, end, plot), legend, not columns)
