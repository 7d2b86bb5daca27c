"""Percentiles of merged sketches against exact percentiles of the raw samples.

Samples are split into consecutive time buckets at arbitrary points (empty buckets
included), each bucket is sketched and stored as bytes, and any window of
consecutive buckets is read back and merged. With ``n`` samples in the window,
sorted as x[1] <= ... <= x[n]:

* the exact nearest-rank percentile at q is x[k] with k = ceil(q * n), at least 1;
* ``quantile(q)`` equals ``value(key(x[k]))``, the representative of the bucket
  holding x[k], and so is within 1 % relative error of x[k] (plus at most 1e-12
  of float rounding in ``value``);
* ``quantile(q, rule="ddsketch")`` targets x[j] with j = floor(q * (n - 1)) + 1,
  which is k or k - 1: it is within 1 % of x[j], and lies between the
  representatives of x[k - 1] and x[k], but can be far from x[k] when those two
  samples are far apart (see the last test), which is why nearest rank is ours.
"""

import math
import random
from collections.abc import Callable
from fractions import Fraction

import numpy as np
from hypothesis import given, settings, target
from hypothesis import strategies as st

from apps.rollups.sketches.ddsketch import MAX_VALUE_MS, RELATIVE_ACCURACY, Sketch, key, value

QS = (0.5, 0.9, 0.95, 0.99)
BOUND = RELATIVE_ACCURACY + 1e-12
HOUR_MS = 3_600_000.0

Shape = Callable[[np.random.Generator, int, st.DrawFn], np.ndarray]


def lognormal(rng: np.random.Generator, n: int, draw: st.DrawFn) -> np.ndarray:
    median = draw(st.floats(min_value=0.5, max_value=5000))
    sigma = draw(st.floats(min_value=0.05, max_value=2.5))
    return rng.lognormal(math.log(median), sigma, n)


def pareto(rng: np.random.Generator, n: int, draw: st.DrawFn) -> np.ndarray:
    scale = draw(st.floats(min_value=1, max_value=500))
    alpha = draw(st.floats(min_value=1.05, max_value=3))
    return (rng.pareto(alpha, n) + 1) * scale


def bimodal(rng: np.random.Generator, n: int, draw: st.DrawFn) -> np.ndarray:
    # Cache hits next to full model calls, say.
    fast = draw(st.floats(min_value=1, max_value=50))
    slow = draw(st.floats(min_value=100, max_value=5000))
    share_fast = draw(st.floats(min_value=0.05, max_value=0.95))
    is_fast = rng.random(n) < share_fast
    return np.where(
        is_fast, rng.lognormal(math.log(fast), 0.3, n), rng.lognormal(math.log(slow), 0.4, n)
    )


SHAPES: dict[str, Shape] = {"lognormal": lognormal, "pareto": pareto, "bimodal": bimodal}


@st.composite
def windows(draw: st.DrawFn) -> tuple[list[np.ndarray], int, int]:
    shape = SHAPES[draw(st.sampled_from(sorted(SHAPES)))]
    n = draw(st.integers(min_value=1, max_value=3000))
    rng = np.random.default_rng(draw(st.integers(min_value=0, max_value=2**32 - 1)))
    samples = np.minimum(shape(rng, n, draw), HOUR_MS)
    bucket_count = draw(st.integers(min_value=1, max_value=60))
    cuts = draw(
        st.lists(
            st.integers(min_value=0, max_value=n),
            min_size=bucket_count - 1,
            max_size=bucket_count - 1,
        )
    )
    buckets = np.split(samples, sorted(cuts))
    first = draw(st.integers(min_value=0, max_value=len(buckets) - 1))
    last = draw(st.integers(min_value=first, max_value=len(buckets) - 1))
    return buckets, first, last


def stored_and_merged(buckets: list[np.ndarray], first: int, last: int) -> Sketch:
    stored = [Sketch.from_values(bucket).to_bytes() for bucket in buckets]
    return Sketch.merged(Sketch.from_bytes(data) for data in stored[first : last + 1])


def nearest_rank_position(q: float, n: int) -> int:
    """1-based rank ceil(q * n), q taken as the decimal it is written as."""
    return max(1, math.ceil(Fraction(str(q)) * n))


@settings(max_examples=300, deadline=None)
@given(windows())
def test_merged_window_is_within_1_percent_of_the_exact_nearest_rank_percentile(
    window: tuple[list[np.ndarray], int, int],
) -> None:
    buckets, first, last = window
    merged = stored_and_merged(buckets, first, last)
    raw = np.sort(np.concatenate(buckets[first : last + 1]))
    if not len(raw):
        assert merged.quantiles(QS) == [None] * len(QS)
        return
    assert merged.to_bytes() == Sketch.from_values(raw).to_bytes()
    worst = 0.0
    for q, estimate in zip(QS, merged.quantiles(QS), strict=True):
        exact = float(raw[nearest_rank_position(q, len(raw)) - 1])
        assert estimate == value(key(exact))
        error = abs(estimate - exact) / exact
        assert error <= BOUND, (q, estimate, exact)
        worst = max(worst, error)
    target(worst, label="relative error against nearest rank")


@settings(max_examples=200, deadline=None)
@given(windows())
def test_ddsketch_rank_is_within_1_percent_of_its_own_order_statistic(
    window: tuple[list[np.ndarray], int, int],
) -> None:
    buckets, first, last = window
    merged = stored_and_merged(buckets, first, last)
    raw = np.sort(np.concatenate(buckets[first : last + 1]))
    if not len(raw):
        return
    n = len(raw)
    for q, estimate in zip(QS, merged.quantiles(QS, rule="ddsketch"), strict=True):
        assert estimate is not None
        targeted = float(raw[math.floor(q * (n - 1))])
        assert abs(estimate - targeted) / targeted <= BOUND
        k = nearest_rank_position(q, n)
        below, at = float(raw[max(k - 2, 0)]), float(raw[k - 1])
        assert value(key(below)) <= estimate <= value(key(at))


def test_ddsketch_rank_can_miss_the_nearest_rank_percentile_by_a_whole_gap() -> None:
    # Nine cache hits and one model call: p95 by nearest rank is the model call.
    sketch = Sketch.from_values([2.0] * 9 + [1800.0])
    assert sketch.quantile(0.95) == value(key(1800.0))
    assert sketch.quantile(0.95, rule="ddsketch") == value(key(2.0))


latencies = st.one_of(
    st.floats(min_value=0, max_value=MAX_VALUE_MS),
    st.floats(min_value=0.1, max_value=10_000),
    st.sampled_from([0.0, -0.0, 5e-324, 1.0]),
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.lists(latencies, max_size=40), min_size=1, max_size=12),
    st.randoms(use_true_random=False),
)
def test_merge_order_and_grouping_never_change_the_bytes(
    parts: list[list[float]], rnd: random.Random
) -> None:
    sketches = [Sketch.from_values(part) for part in parts]
    everything = np.concatenate([np.asarray(part, dtype=np.float64) for part in parts])
    expected = Sketch.from_values(everything).to_bytes()

    pool = [sketch.copy() for sketch in sketches]
    while len(pool) > 1:
        left, right = rnd.sample(range(len(pool)), 2)
        if rnd.random() < 0.5:
            pool[left].merge(pool[right])
        else:
            pool[left] = Sketch.merged([pool[right], pool[left]])
        del pool[right]

    assert pool[0].to_bytes() == expected
    assert Sketch.merged(reversed(sketches)).to_bytes() == expected
    assert Sketch.from_bytes(expected) == pool[0]
