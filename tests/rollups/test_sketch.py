"""The sketch against the reference ``ddsketch`` package, and its contract."""

import math
from typing import Any

import numpy as np
import pytest
from ddsketch import DDSketch
from ddsketch.mapping import LogarithmicMapping

from apps.rollups.sketches import ddsketch as sketch_module
from apps.rollups.sketches.ddsketch import (
    GAMMA,
    MAX_VALUE_MS,
    MIN_INDEXABLE_MS,
    MULTIPLIER,
    RELATIVE_ACCURACY,
    Sketch,
    key,
    keys,
    value,
)

REFERENCE = LogarithmicMapping(RELATIVE_ACCURACY)
QUANTILE_GRID = [i / 1000 for i in range(1001)] + [0.5, 0.9, 0.95, 0.99, 0.999, 1 / 3]


def reference_sketch(values: np.ndarray) -> DDSketch:
    reference = DDSketch(RELATIVE_ACCURACY)
    for v in values.tolist():
        reference.add(v)
    return reference


def datasets() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(20240601)
    return {
        "lognormal": rng.lognormal(math.log(180), 0.6, 5000),
        "pareto": (rng.pareto(1.3, 5000) + 1) * 40,
        "bimodal": np.concatenate([rng.lognormal(1.5, 0.3, 700), rng.lognormal(7, 0.4, 300)]),
        "with zeros": np.concatenate([np.zeros(40), [5e-324, 1e-310], rng.exponential(3, 500)]),
        "one value": np.array([42.0]),
        "two values": np.array([3.0, 3000.0]),
        "whole range": np.exp(rng.uniform(-700, 22.8, 3000)),
    }


def test_mapping_constants_are_the_reference_doubles() -> None:
    assert REFERENCE.gamma == GAMMA
    assert REFERENCE._multiplier == MULTIPLIER
    assert REFERENCE.min_possible == MIN_INDEXABLE_MS


def test_keys_equal_the_reference_keys_across_all_magnitudes() -> None:
    rng = np.random.default_rng(7)
    values = np.concatenate(
        [np.exp(rng.uniform(-700, 22.8, 100_000)), rng.lognormal(5, 2, 100_000)]
    )
    expected = np.array([REFERENCE.key(v) for v in values.tolist()])
    assert np.array_equal(keys(values), expected)
    assert [key(v) for v in values[:1000].tolist()] == expected[:1000].tolist()


def test_keys_equal_the_reference_keys_within_8_ulps_of_every_bucket_edge() -> None:
    # numpy's log differs from the C library's by an ulp on some inputs; on this
    # scan that moved a handful of values (1.899889977911567e87 among them) into the
    # neighbouring bucket before keys() rechecked values near an edge.
    edges = np.power(2.0, np.arange(-35000, 35000) / MULTIPLIER)
    below, above, scan = edges.copy(), edges.copy(), [edges, np.array([1.899889977911567e87])]
    for _ in range(8):
        below, above = np.nextafter(below, 0), np.nextafter(above, np.inf)
        scan += [below, above]
    values = np.concatenate(scan)
    values = values[np.isfinite(values) & (values > MIN_INDEXABLE_MS)]
    expected = np.array([REFERENCE.key(v) for v in values.tolist()])
    assert np.array_equal(keys(values), expected)


def test_bucket_value_equals_the_reference_value() -> None:
    for k in range(-35000, 35000, 7):
        assert value(k) == REFERENCE.value(k)


@pytest.mark.parametrize("name", list(datasets()))
def test_ddsketch_rule_quantiles_are_bit_identical_to_the_reference(name: str) -> None:
    values = datasets()[name]
    ours, reference = Sketch.from_values(values), reference_sketch(values)
    assert ours.quantiles(QUANTILE_GRID, rule="ddsketch") == [
        reference.get_quantile_value(q) for q in QUANTILE_GRID
    ]
    assert ours.count == reference.count
    assert ours.zero_count == reference._zero_count
    assert ours.min == reference._min
    assert ours.max == reference._max
    assert ours.sum == pytest.approx(reference.sum, rel=1e-12, abs=len(values) * 5e-7)


def test_merged_sketches_are_bit_identical_to_merged_reference_sketches() -> None:
    parts = list(datasets().values())
    merged_reference = DDSketch(RELATIVE_ACCURACY)
    for part in parts:
        merged_reference.merge(reference_sketch(part))
    merged = Sketch.merged(Sketch.from_values(part) for part in parts)
    assert merged.quantiles(QUANTILE_GRID, rule="ddsketch") == [
        merged_reference.get_quantile_value(q) for q in QUANTILE_GRID
    ]
    assert merged.count == merged_reference.count


def test_nearest_rank_and_ddsketch_rank_differ_by_one_sample_at_most() -> None:
    sketch = Sketch.from_values(np.arange(1, 11, dtype=float))
    # Nearest rank: ceil(0.95 * 10) = 10th value; DDSketch: index floor(0.95 * 9) = 8.
    assert sketch.quantile(0.95) == value(key(10.0))
    assert sketch.quantile(0.95, rule="ddsketch") == value(key(9.0))
    assert sketch.quantile(0.5) == sketch.quantile(0.5, rule="ddsketch") == value(key(5.0))


def test_quantile_reads_q_as_the_decimal_it_prints_as() -> None:
    # 0.07 * 100 is 7.000000000000001 in floating point; the 7th value is meant.
    sketch = Sketch.from_values(np.arange(1, 101, dtype=float) * 10)
    assert sketch.quantile(0.07) == value(key(70.0))
    assert sketch.quantiles([0.0, 1.0]) == [value(key(10.0)), value(key(1000.0))]


def test_zero_and_subnormal_values_are_counted_as_zero() -> None:
    sketch = Sketch.from_values([0.0, 5e-324, MIN_INDEXABLE_MS, 12.5])
    assert sketch.zero_count == 3
    assert sketch.buckets() == {key(12.5): 1}
    assert sketch.quantiles([0.5, 1.0]) == [0.0, value(key(12.5))]
    assert sketch.min == 0.0


@pytest.mark.parametrize(
    "values",
    [[1.0, -0.5], [math.nan], [math.inf], [MAX_VALUE_MS * 1.01], [[1.0, 2.0]], ["x"]],
)
def test_invalid_values_are_rejected(values: list[Any]) -> None:
    with pytest.raises(ValueError):  # noqa: PT011
        Sketch.from_values(values)


def test_a_rejected_batch_leaves_the_sketch_unchanged() -> None:
    sketch = Sketch.from_values([1.0, 2.0])
    with pytest.raises(ValueError, match="finite milliseconds"):
        sketch.add_many([3.0, math.nan])
    assert sketch == Sketch.from_values([1.0, 2.0])


def test_empty_sketch_has_no_quantiles_and_merges_as_identity() -> None:
    empty = Sketch.from_values([])
    assert (empty.count, empty.sum, empty.mean, empty.min, empty.max) == (0, 0.0, None, None, None)
    assert empty.quantiles([0.5, 0.99]) == [None, None]
    full = Sketch.from_values([4.0, 8.0])
    assert Sketch.merged([empty, full, Sketch()]) == full
    empty.merge(full)
    assert empty == full


def test_sum_is_exact_for_nanosecond_inputs() -> None:
    rng = np.random.default_rng(3)
    nanoseconds = rng.integers(1, 30 * 86_400 * 10**9, 50_000)
    sketch = Sketch.from_values(nanoseconds / 1e6)
    assert sketch.sum_ns == sum(nanoseconds.tolist())
    assert sketch.mean == pytest.approx(nanoseconds.mean() / 1e6)


def test_sum_stays_exact_past_the_int64_range() -> None:
    sketch = Sketch.from_values(np.full(5000, MAX_VALUE_MS))
    assert sketch.sum_ns == 5000 * round(MAX_VALUE_MS * 1e6)
    assert sketch.sum_ns > 2**63


def test_add_many_and_merge_in_place_equal_one_sketch_of_everything() -> None:
    rng = np.random.default_rng(11)
    a, b, c = rng.lognormal(4, 1, 300), rng.lognormal(6, 1, 200), np.zeros(3)
    grown = Sketch.from_values(a)
    grown.add_many(b)
    grown.merge(Sketch.from_values(c))
    assert grown == Sketch.from_values(np.concatenate([a, b, c]))
    assert grown.count == 503


def test_merged_leaves_its_inputs_unchanged() -> None:
    a, b = Sketch.from_values([1.0, 2.0]), Sketch.from_values([2.0, 300.0])
    before_a, before_b = a.to_bytes(), b.to_bytes()
    merged = Sketch.merged([a, b])
    merged.add_many([5.0])
    assert (a.to_bytes(), b.to_bytes()) == (before_a, before_b)
    assert merged.count == 5


def test_copy_is_independent() -> None:
    original = Sketch.from_values([1.0, 2.0])
    duplicate = original.copy()
    duplicate.add_many([3.0])
    assert original.count == 2
    assert duplicate.count == 3


@pytest.mark.parametrize("q", [-0.01, 1.01, math.nan])
def test_quantile_outside_zero_to_one_is_rejected(q: float) -> None:
    with pytest.raises(ValueError, match="between 0 and 1"):
        Sketch.from_values([1.0]).quantile(q)


def test_unknown_quantile_rule_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown quantile rule"):
        Sketch.from_values([1.0]).quantile(0.5, rule="linear")  # type: ignore[arg-type]


def test_values_inside_a_bucket_skip_the_exact_recheck(monkeypatch: pytest.MonkeyPatch) -> None:
    rechecked: list[float] = []

    def recording_key(v: float) -> int:
        rechecked.append(v)
        return 0

    monkeypatch.setattr(sketch_module, "key", recording_key)
    keys(np.array([value(k) * 1.005 for k in range(-500, 500)]))
    assert rechecked == []
