"""The what-if page's chart geometry: shared bins, round ticks, labels kept inside."""

from typing import Any

from apps.dashboards.whatif_charts import distribution_chart, stage_bars


def test_both_distributions_share_the_bins_and_the_labels_stay_inside() -> None:
    distribution = {"edges_ms": [0.0, 1000.0, 2000.0, 3000.0, 5200.0],
                    "before": [1, 5, 3, 1], "after": [3, 5, 2, 0]}  # fmt: skip
    chart = distribution_chart(
        distribution, lines=[("p95 now", 5000.0, "mark"), ("p95 after", 1500.0, "mark after")]
    )

    assert len(chart.before) == 4
    assert len(chart.after) == 3  # an empty bin draws nothing
    assert chart.before[3].title.endswith("or more: 1 (10.0 %)")
    assert [tick.label for tick in chart.x_ticks] == ["0 ms", "2 s", "4 s"]
    assert max(tick.position for tick in chart.x_ticks) <= chart.plot.width - chart.plot.right
    now, after = chart.lines
    assert now.leftwards
    assert not after.leftwards
    tallest = max(bar.height for bar in chart.before + chart.after)
    assert tallest == chart.plot.inner_height


def test_no_traces_draw_an_empty_chart() -> None:
    chart = distribution_chart({"edges_ms": [], "before": [], "after": []})
    assert chart.empty


def test_stage_bars_share_one_scale_and_mark_a_budget_broken_after() -> None:
    def row(slug: str, p95: float | None, budget: int | None = None) -> dict[str, Any]:
        return {
            "slug": slug,
            "name": slug.title(),
            "p95": p95,
            "budget": {"p95": budget} if budget else None,
            "intervals": {"p95": [p95, p95]},
            "critical_path": {"share": 0.1},
        }

    result = {"before": {"stages": [row("a", 100.0), row("b", 400.0, 300)]},
              "after": {"stages": [row("a", 50.0), row("b", 350.0, 300)]}}  # fmt: skip
    a, b = stage_bars(result, "p95")

    assert (a.before_width, a.after_width, b.before_width, b.after_width) == (
        25.0,
        12.5,
        100.0,
        87.5,
    )
    assert b.over_after
    assert not a.over_after
    assert a.change_ms == -50.0
