"""The lever finder on traces with known levers; percentiles, intervals and change texts."""

import numpy as np
import pytest
from django.core.exceptions import ValidationError

from apps.whatif.changes import Change, change_from_data, change_from_text
from apps.whatif.levers import LeverStage, bimodal_split, levers_find
from apps.whatif.outcome import Resamples, nearest_rank
from apps.whatif.scenario import Scenario
from tests.whatif.models import by_name, model_of, ms_span


def sequential(offset: float, a_ms: float, b_ms: float, c_ms: float) -> list:
    """a, then b, then c, each right after the last, in a server span."""
    return [
        ms_span(1, None, 0, a_ms + b_ms + c_ms, "server"),
        ms_span(2, 1, 0, a_ms, "a"),
        ms_span(3, 1, a_ms, a_ms + b_ms, "b"),
        ms_span(4, 1, a_ms + b_ms, a_ms + b_ms + c_ms, "c"),
    ]


def test_stages_that_always_ran_in_sequence_are_a_lever_worth_their_overlap() -> None:
    rng = np.random.default_rng(3)
    traces = [sequential(0, 100, float(rng.uniform(50, 150)), 400) for _ in range(200)]
    stages = [LeverStage(s, s.upper()) for s in "abc"]
    found = levers_find(model_of(traces, by_name("a", "b", "c")), stages=stages)

    concurrent = {
        lever["stage"]: lever for lever in found["levers"] if lever["kind"] == "concurrent"
    }
    # a (100 ms) beside b (50 to 150 ms): the p95 loses the shorter of the two, 100 ms.
    assert concurrent["a"]["saving_ms"] == pytest.approx(100, abs=1)
    assert concurrent["a"]["changes"] == [{"stage": "a", "op": "parallel", "with": "b"}]
    sensitivity = {row["stage"]: row for row in found["sensitivity"]}
    assert sensitivity["c"]["saving_10pct_ms"] == pytest.approx(40, abs=0.5)
    assert sensitivity["a"]["saving_100ms_ms"] == pytest.approx(100, abs=0.5)


def test_levers_are_found_on_top_of_the_scenario_and_never_touch_what_it_removed() -> None:
    rng = np.random.default_rng(3)
    b_times = rng.uniform(50, 150, 200)
    traces = [sequential(0, 100, float(b_ms), 400) for b_ms in b_times]
    stages = [LeverStage(s, s.upper()) for s in "abc"]
    model = model_of(traces, by_name("a", "b", "c"))
    as_ran = levers_find(model, stages=stages)
    assert any("B" in lever["title"] for lever in as_ran["levers"])

    found = levers_find(model, stages=stages, scenario=[Change("b", "remove")])

    # Without b every trace takes a + c = 500 ms: the savings start from there.
    assert found["base_ms"] == pytest.approx(500, abs=0.1)
    b_p95 = nearest_rank(b_times, 0.95)
    assert b_p95 is not None
    assert as_ran["base_ms"] == pytest.approx(500 + b_p95, abs=0.1)
    assert [row["stage"] for row in found["sensitivity"]] == ["a", "c"]
    sensitivity = {row["stage"]: row for row in found["sensitivity"]}
    assert sensitivity["a"]["saving_100ms_ms"] == pytest.approx(100, abs=0.1)
    assert sensitivity["c"]["saving_10pct_ms"] == pytest.approx(40, abs=0.1)
    for lever in found["levers"]:
        assert lever["stage"] != "b"
        assert all("b" not in (c["stage"], c.get("with")) for c in lever["changes"])
        assert "B" not in lever["title"]


def test_no_lever_repeats_a_pair_the_scenario_runs_concurrently_or_a_cache_it_has() -> None:
    rng = np.random.default_rng(4)
    # c has two speeds (a cache at work): 15 ms or 400 ms.
    c_times = np.where(rng.uniform(size=300) < 0.4, 15.0, 400.0) * rng.uniform(0.9, 1.1, 300)
    traces = [sequential(0, 100, float(rng.uniform(50, 150)), float(c)) for c in c_times]
    stages = [LeverStage(s, s.upper()) for s in "abc"]
    model = model_of(traces, by_name("a", "b", "c"))
    kinds = {
        (lever["kind"], lever["stage"]) for lever in levers_find(model, stages=stages)["levers"]
    }
    assert {("concurrent", "a"), ("cache", "c")} <= kinds

    scenario = [
        Change("a", "parallel", with_stage="b"),
        Change("c", "cache", hit_ratio=0.5, hit_ms=15),
    ]
    found = levers_find(model, stages=stages, scenario=scenario)

    pairs = [
        {lever["changes"][0]["stage"], lever["changes"][0].get("with")}
        for lever in found["levers"]
        if lever["kind"] == "concurrent"
    ]
    assert {"a", "b"} not in pairs
    assert ("cache", "c") not in {(lever["kind"], lever["stage"]) for lever in found["levers"]}


def test_a_stage_with_two_speeds_is_a_cache_lever_and_one_speed_is_not() -> None:
    rng = np.random.default_rng(4)
    fast = rng.lognormal(np.log(15), 0.2, 400)
    slow = rng.lognormal(np.log(300), 0.2, 600)
    split = bimodal_split(np.concatenate([fast, slow]) * 1e6)
    assert split is not None
    share, fast_ns, slow_ns = split
    assert share == pytest.approx(0.4, abs=0.01)
    assert fast_ns / 1e6 == pytest.approx(15, rel=0.1)
    assert slow_ns / 1e6 == pytest.approx(300, rel=0.1)
    assert bimodal_split(rng.lognormal(np.log(300), 0.5, 2000) * 1e6) is None
    assert bimodal_split(np.array([1e6] * 10)) is None  # too few to tell


def test_nearest_rank_is_the_smallest_value_with_enough_values_at_or_below_it() -> None:
    values = np.arange(1, 101, dtype=float)
    assert nearest_rank(values, 0.95) == 95
    assert nearest_rank(values, 0.951) == 96
    assert nearest_rank(np.array([7.0]), 0.99) == 7
    assert nearest_rank(np.array([]), 0.5) is None


def test_bootstrap_intervals_hold_the_percentile_and_are_reproducible() -> None:
    values = np.random.default_rng(5).lognormal(np.log(1e9), 0.4, 2000)
    first = Resamples.draw(len(values)).intervals(values)
    again = Resamples.draw(len(values)).intervals(values)
    assert first == again
    for name, q in {"p50": 0.5, "p95": 0.95, "p99": 0.99}.items():
        low, high = first[name]
        assert low is not None
        assert high is not None
        value = nearest_rank(values, q)
        assert value is not None
        assert low <= value / 1e6 <= high
    # Wider in the tail, where fewer values decide the percentile.
    widths = {name: (bounds[1] or 0) - (bounds[0] or 0) for name, bounds in first.items()}
    assert widths["p99"] > widths["p50"]


STAGES = {"rerank": object(), "tool": type("Stage", (), {"budget_ms": 500})()}


@pytest.mark.parametrize(
    "change",
    [
        Change("rerank", "remove"),
        Change("rerank", "scale", factor=0.8),
        Change("rerank", "shift", ms=-100.5),
        Change("rerank", "cache", hit_ratio=0.4, hit_ms=20),
        Change("rerank", "parallel", with_stage="tool"),
        Change("tool", "cap", ms=500),
        Change("tool", "cap"),
    ],
)
def test_a_change_reads_back_from_its_text_and_its_data(change: Change) -> None:
    assert change_from_text(change.as_text(), stages=STAGES) == change
    assert change_from_data(change.as_data(), stages=STAGES) == change


@pytest.mark.parametrize(
    "text", ["", "rerank", "rerank:scale", "rerank:scale:x", "rerank:scale:nan", "rerank:cap:soon",
             "rerank:remove:now", "tool:parallel:tool:tool", "rerank:scale:inf"],
)  # fmt: skip
def test_a_change_text_that_makes_no_sense_is_refused(text: str) -> None:
    with pytest.raises(ValidationError):
        change_from_text(text, stages=STAGES)


def test_a_cap_at_the_budget_of_a_stage_without_one_is_refused() -> None:
    with pytest.raises(ValidationError, match="no budget"):
        change_from_data({"stage": "rerank", "op": "cap", "at": "budget"}, stages=STAGES)


def test_the_cache_draws_are_fixed_per_trace_and_nested_by_ratio() -> None:
    keys = np.arange(10_000, dtype=np.int64)
    scenario = Scenario(seeds={0: 12345})
    low, high = scenario.cache_hits(keys, 0, 0.3), scenario.cache_hits(keys, 0, 0.6)
    assert low.mean() == pytest.approx(0.3, abs=0.02)
    assert high.mean() == pytest.approx(0.6, abs=0.02)
    assert np.all(high[low])  # every hit at 30 % is a hit at 60 %
    assert np.array_equal(low, scenario.cache_hits(keys, 0, 0.3))
