"""Chart geometry: what the SVG templates draw, computed on known inputs."""

import itertools

import numpy as np
import pytest

from apps.core.figures import format_percent, stage_colour
from apps.dashboards.charts import (
    TimedValue,
    downsample_max,
    histogram,
    line_chart,
    nice_ceiling,
    sparkline,
    stacked_bar,
)
from apps.rollups.sketches.ddsketch import Sketch


def test_shares_read_as_percent() -> None:
    assert format_percent(0.4234, 1) == "42.3 %"
    assert format_percent(None) == "—"


def test_a_stage_keeps_its_colour_by_its_place_and_the_palette_wraps() -> None:
    assert [stage_colour(i) for i in (0, 1, 7, 8)] == ["stage-0", "stage-1", "stage-7", "stage-0"]


@pytest.mark.parametrize(("value", "top"), [(0, 1), (0.7, 1), (1.2, 2), (2.2, 2.5), (3, 5),
                                            (870, 1000), (1001, 2000)])  # fmt: skip
def test_axes_end_on_a_round_number(value: float, top: float) -> None:
    assert nice_ceiling(value) == pytest.approx(top)


def test_downsampling_keeps_the_largest_value_of_each_column_and_every_sample() -> None:
    points = [TimedValue(i * 10, float(v) if v is not None else None, 1)
              for i, v in enumerate([1, 9, 2, None, None, None, 3, 4, 800])]  # fmt: skip
    thinned = downsample_max(points, 3)
    assert [p.value for p in thinned] == [9.0, None, 800.0]
    assert [p.start for p in thinned] == [0, 30, 60]
    assert sum(p.count for p in thinned) == 9
    assert downsample_max(points, 20) == points


def test_a_line_never_has_more_points_than_pixel_columns() -> None:
    points = [TimedValue(i * 10, float(i % 50), 3) for i in range(5000)]
    chart = line_chart(points, start=0, end=50_000, step=10, width=400)
    assert len(chart.markers) <= chart.plot.inner_width
    # The spike of each column survives: every 49 ms peak is still drawn.
    assert max(float(m.title.split()[0]) for m in chart.markers) == 49.0


def test_a_gap_in_the_data_breaks_the_line_and_the_budget_and_bands_are_placed() -> None:
    points = [TimedValue(0, 100.0, 5), TimedValue(60, 120.0, 4), TimedValue(120, None, 0),
              TimedValue(180, 300.0, 6)]  # fmt: skip
    chart = line_chart(points, start=0, end=240, step=60, budget_ms=200, bands=[(120, 240, "v")],
                       width=356, height=100)  # fmt: skip
    assert chart.path.count("M") == 2
    assert chart.path.count("L") == 1
    assert chart.markers[0].title == "100 ms at 1970-01-01 00:00:00 UTC (5 samples)"
    top = chart.y_ticks[-1]
    assert top.label == "500 ms"  # 300 x 1.08 rounded up
    assert chart.budget_y == pytest.approx(
        chart.plot.baseline - 200 / 500 * chart.plot.inner_height, abs=0.1
    )
    band = chart.bands[0]
    assert band.x == pytest.approx(chart.plot.left + chart.plot.inner_width / 2)
    assert band.width == pytest.approx(chart.plot.inner_width / 2)
    assert not chart.empty


def test_a_point_alone_between_gaps_is_still_drawn() -> None:
    points = [TimedValue(0, None, 0), TimedValue(60, 120.0, 3), TimedValue(120, None, 0)]
    chart = line_chart(points, start=0, end=180, step=60)
    assert chart.path.endswith("l0,0")
    assert sparkline(points, budget_ms=None).path.endswith("l0,0")


def test_an_empty_series_says_so() -> None:
    chart = line_chart([TimedValue(0, None, 0)], start=0, end=60, step=60)
    assert chart.empty
    assert chart.path == ""
    assert sparkline([], budget_ms=None).empty


def test_stacked_parts_fill_the_bar_in_order_and_skip_nothing_positive() -> None:
    parts = [("a", "A", 3.0, "stage-0", ""), ("b", "B", 0.0, "stage-1", ""),
             ("c", "C", 1.0, "stage-2", ""), ("u", "untracked", 1.0, "untracked", "")]  # fmt: skip
    segments = stacked_bar(parts)
    assert [s.key for s in segments] == ["a", "c", "u"]
    assert [s.x for s in segments] == [0, 60, 80]
    assert sum(s.width for s in segments) == pytest.approx(100)
    assert stacked_bar([("a", "A", 0.0, "stage-0", "")]) == []


def test_the_histogram_of_a_sketch_counts_every_sample_once() -> None:
    rng = np.random.default_rng(3)
    values = np.concatenate([rng.lognormal(3, 0.3, 4000), rng.lognormal(6.5, 0.2, 1000), [0, 0]])
    sketch = Sketch.from_values(values)
    bins = sketch.histogram(40)
    assert sum(count for _, _, count in bins) == len(values)
    assert bins[0] == (0.0, bins[1][0], 2)
    # Bins are contiguous and each holds values within its edges (to the sketch's 1 %).
    for (_, high, _), (low, _, _) in itertools.pairwise(bins):
        assert low == pytest.approx(high)
    below_100 = sum(count for low, high, count in bins if high <= 100)
    assert below_100 == pytest.approx(int((values < 100).sum()), rel=0.02)
    chart = histogram(bins, marks=[("p50", 20.0), ("p99", 900.0)], budget_ms=500)
    assert len(chart.bars) == len([b for b in bins if b[2] and b[1] > 0])
    assert [m.label for m in chart.marks] == ["p50 20 ms", "p99 900 ms", "budget 500 ms"]
    assert chart.marks[0].position < chart.marks[2].position < chart.marks[1].position
