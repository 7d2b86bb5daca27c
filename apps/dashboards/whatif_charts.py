"""Geometry of the what-if page's charts: stage bars before and after, and the end-to-end
distribution before and after on shared bins. Templates draw what these compute."""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from apps.core.figures import format_ms, stage_colour
from apps.dashboards.charts import HistogramBar, Plot, Tick, nice_ceiling


@dataclass(frozen=True)
class StageBars:
    slug: str
    name: str
    colour: str
    before_ms: float | None
    after_ms: float | None
    before_width: float  # percent of the widest
    after_width: float
    interval: list[float | None]  # the after value's 95 % interval
    share_before: float | None
    share_after: float | None
    budget_ms: int | None
    over_after: bool

    @property
    def change_ms(self) -> float | None:
        if self.before_ms is None or self.after_ms is None:
            return None
        return round(self.after_ms - self.before_ms, 1)


def stage_bars(result: dict[str, Any], percentile: str) -> list[StageBars]:
    """Each stage's percentile before and after, as bars sharing one scale."""
    befores, afters = result["before"]["stages"], result["after"]["stages"]
    values = [row[percentile] for row in [*befores, *afters] if row[percentile] is not None]
    top = max(values, default=0) or 1.0
    rows = []
    for ordinal, (before, after) in enumerate(zip(befores, afters, strict=True)):
        budget = (after["budget"] or {}).get(percentile)
        after_value = after[percentile]
        rows.append(
            StageBars(
                slug=after["slug"],
                name=after["name"],
                colour=stage_colour(ordinal),
                before_ms=before[percentile],
                after_ms=after_value,
                before_width=round((before[percentile] or 0) / top * 100, 1),
                after_width=round((after_value or 0) / top * 100, 1),
                interval=after["intervals"][percentile],
                share_before=before["critical_path"]["share"],
                share_after=after["critical_path"]["share"],
                budget_ms=budget,
                over_after=budget is not None and after_value is not None and after_value > budget,
            )
        )
    return rows


@dataclass(frozen=True)
class Line:
    """A vertical at a value; its label reads leftwards near the right edge, to stay in."""

    x: float
    label: str
    css: str
    leftwards: bool = False


@dataclass(frozen=True)
class Distribution:
    plot: Plot
    before: list[HistogramBar]
    after: list[HistogramBar]
    lines: list[Line]
    x_ticks: list[Tick]
    empty: bool


def distribution_chart(
    distribution: dict[str, Any],
    *,
    lines: Sequence[tuple[str, float | None, str]] = (),
    width: int = 720,
    height: int = 220,
) -> Distribution:
    """Two histograms over the same bins (the last holds the tail), before behind after;
    ``lines`` are (label, ms, css class) verticals: the percentiles and the budget."""
    plot = Plot(width=width, height=height, left=16, right=16, top=16 + 14 * len(lines))
    edges = distribution["edges_ms"]
    before, after = distribution["before"], distribution["after"]
    if not edges or not (sum(before) or sum(after)):
        return Distribution(plot, [], [], [], [], empty=True)
    top_ms = max(edges[-1], *(value for _, value, _ in lines if value is not None))
    tallest = max(*before, *after, 1)

    def x_of(value: float) -> float:
        return round(plot.left + min(value, top_ms) / top_ms * plot.inner_width, 1)

    def bars(counts: list[int], label: str) -> list[HistogramBar]:
        total = sum(counts) or 1
        out = []
        for index, count in enumerate(counts):
            if not count:
                continue
            x0, x1 = x_of(edges[index]), x_of(edges[index + 1])
            bar_height = count / tallest * plot.inner_height
            tail = " or more" if index == len(counts) - 1 else ""
            title = (
                f"{label}: {format_ms(edges[index])} to {format_ms(edges[index + 1])}{tail}: "
                f"{count} ({count / total * 100:.1f} %)"
            )
            top = round(plot.baseline - bar_height, 1)
            width = max(x1 - x0 - 0.5, 0.5)
            out.append(HistogramBar(x0, top, width, round(bar_height, 1), title))
        return out

    drawn = [Line(x_of(value), f"{label} {format_ms(value)}", css, x_of(value) > width * 0.75)
             for label, value, css in lines if value is not None]  # fmt: skip
    # Round ticks, about five, up to the end of the data (not to a rounder end past it).
    step_ms = nice_ceiling(top_ms / 5)
    ticks = [
        Tick(x_of(step_ms * k), format_ms(step_ms * k)) for k in range(int(top_ms // step_ms) + 1)
    ]
    return Distribution(plot, bars(before, "before"), bars(after, "after"), drawn, ticks, False)
