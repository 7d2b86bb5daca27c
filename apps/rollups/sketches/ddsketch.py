"""Mergeable latency sketch: the DDSketch logarithmic mapping at 1 % relative accuracy.

Contract:

* Values are latencies in milliseconds, as floats (callers holding nanosecond
  integers divide by 1e6). They must be finite, >= 0 and at most ``MAX_VALUE_MS``;
  anything else raises ValueError, because a negative or absurd duration is a bug
  upstream, not a sample.
* A positive value ``v`` above ``MIN_INDEXABLE_MS`` goes to the bucket
  ``ceil(log2(v) * MULTIPLIER)``, which is DDSketch's ``LogarithmicMapping(0.01)``
  key with offset 0, computed so that keys are identical to that package's
  (numpy's log can differ from the C library's by an ulp, so values within 1e-9 of
  a bucket boundary are recomputed with ``math.log``). A bucket stands for
  ``value(key)``, DDSketch's representative, within 1 % of every value it holds.
* Values at or below ``MIN_INDEXABLE_MS`` (zero and subnormal floats) are counted
  in ``zero_count`` and read back as 0.0, as DDSketch does.
* ``quantile(q)`` uses the nearest-rank rule: the value stands for the sample at
  1-based rank ``ceil(q * n)`` (q read as the decimal it prints as, so 0.07 * 100 is
  rank 7), and equals ``value(key(x))`` for that exact sample ``x``, hence is within
  1 % of the exact nearest-rank percentile. ``rule="ddsketch"`` instead uses
  DDSketch's rank ``q * (n - 1)`` (the sample at 0-based index ``floor(q * (n-1))``)
  and returns exactly what ``DDSketch.get_quantile_value`` returns. The two ranks
  are equal or the DDSketch one is one lower.
* ``count``, ``min`` and ``max`` are exact. The sum is kept as integer nanoseconds
  (each value rounded to the nanosecond) so that merging is exactly associative and
  commutative: the same samples give the same bytes whatever the merge order.

Many stored sketches are decoded and merged far faster together, per group, by
``merge_batch.merged_groups`` (same results and errors as one by one).
"""

import math
import sys
from collections.abc import Iterable, Sequence
from decimal import ROUND_CEILING, Decimal
from typing import Literal

import numpy as np
import numpy.typing as npt
from numpy.typing import NDArray

from apps.core.time import NS_PER_DAY, NS_PER_MS
from apps.rollups.sketches import codec as sketch_codec

RELATIVE_ACCURACY = 0.01
_GAMMA_MANTISSA = 2 * RELATIVE_ACCURACY / (1 - RELATIVE_ACCURACY)
GAMMA = 1 + _GAMMA_MANTISSA
# Same operations in the same order as DDSketch's LogarithmicMapping, so that
# every constant is the same double.
MULTIPLIER = (1 / math.log1p(_GAMMA_MANTISSA)) * math.log(2)
_LN2 = math.log(2)
_BUCKET_SCALE = 2.0 / (1 + GAMMA)
MIN_INDEXABLE_MS = sys.float_info.min * GAMMA
# Each value in nanoseconds must stay an exact double (< 2**53): 100 days.
MAX_VALUE_MS = 100 * NS_PER_DAY / NS_PER_MS
# Half-width of the band around a bucket boundary where numpy's log is not trusted.
_BOUNDARY_BAND = 1e-9
_INT64_LIMIT = 1 << 63

Rule = Literal["nearest", "ddsketch"]


def key(value: float) -> int:
    """Bucket key of one positive value above MIN_INDEXABLE_MS."""
    return math.ceil(math.log(value, 2) * MULTIPLIER)


def value(bucket_key: int) -> float:
    """The value a bucket stands for (DDSketch's ``LogarithmicMapping.value``)."""
    return math.pow(2.0, bucket_key / MULTIPLIER) * _BUCKET_SCALE


def keys(values: NDArray[np.float64]) -> NDArray[np.int64]:
    """Bucket keys of positive values above MIN_INDEXABLE_MS, equal to ``key`` for each."""
    scaled = np.log(values)
    scaled /= _LN2
    scaled *= MULTIPLIER
    ceiling = np.ceil(scaled)
    result = ceiling.astype(np.int64)
    ceiling -= scaled
    near = (ceiling < _BOUNDARY_BAND) | (ceiling > 1 - _BOUNDARY_BAND)
    for index in np.flatnonzero(near):
        result[index] = key(float(values[index]))
    return result


def _checked(values: npt.ArrayLike) -> tuple[NDArray[np.float64], float, float]:
    """The values as a float array, with their min and max (each + 0.0 to drop -0.0)."""
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1:
        raise ValueError("sketch values must be a one-dimensional array")
    if not len(array):
        return array, math.inf, -math.inf
    low, high = float(array.min()) + 0.0, float(array.max()) + 0.0
    if not (low >= 0 and high <= MAX_VALUE_MS):
        raise ValueError(
            f"sketch values must be finite milliseconds between 0 and {MAX_VALUE_MS:.0f}"
        )
    return array, low, high


def _sum_ns(values: NDArray[np.float64], largest: float) -> int:
    nanoseconds = np.rint(values * NS_PER_MS).astype(np.int64)
    largest_ns = round(largest * NS_PER_MS)
    if largest_ns * len(values) < _INT64_LIMIT:
        return int(nanoseconds.sum())
    step = max(1, (_INT64_LIMIT - 1) // max(largest_ns, 1))
    return sum(int(nanoseconds[i : i + step].sum()) for i in range(0, len(values), step))


def _tally(bucket_keys: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    low = int(bucket_keys.min())
    totals = np.bincount(bucket_keys - low)
    present = np.flatnonzero(totals)
    return present + low, totals[present]


def _combine(
    key_arrays: Sequence[NDArray[np.int64]], count_arrays: Sequence[NDArray[np.int64]]
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    all_keys = np.concatenate(key_arrays)
    low = int(all_keys.min())
    totals = np.zeros(int(all_keys.max()) - low + 1, dtype=np.int64)
    np.add.at(totals, all_keys - low, np.concatenate(count_arrays))
    present = np.flatnonzero(totals)
    return present + low, totals[present]


def _nearest_rank(q: float, count: int) -> int:
    """0-based index of the sample at 1-based rank ceil(q * count)."""
    rank = (Decimal(repr(float(q))) * count).to_integral_value(rounding=ROUND_CEILING)
    return max(1, int(rank)) - 1


class Sketch:
    __slots__ = ("_counts", "_keys", "_max", "_min", "_sum_ns", "_zero_count")

    def __init__(self) -> None:
        self._keys: NDArray[np.int64] = np.empty(0, dtype=np.int64)
        self._counts: NDArray[np.int64] = np.empty(0, dtype=np.int64)
        self._zero_count = 0
        self._sum_ns = 0
        self._min = math.inf
        self._max = -math.inf

    @classmethod
    def from_values(cls, values: npt.ArrayLike) -> "Sketch":
        array, low, high = _checked(values)
        sketch = cls()
        if not len(array):
            return sketch
        # Without -0.0 (see _checked) merge order cannot pick the sign of min or max.
        sketch._min, sketch._max = low, high
        sketch._sum_ns = _sum_ns(array, sketch._max)
        positive = array
        if sketch._min <= MIN_INDEXABLE_MS:
            positive = array[array > MIN_INDEXABLE_MS]
            sketch._zero_count = len(array) - len(positive)
        if len(positive):
            sketch._keys, sketch._counts = _tally(keys(positive))
        return sketch

    @classmethod
    def merged(cls, sketches: Iterable["Sketch"]) -> "Sketch":
        """A new sketch of all the given sketches' values; the inputs are unchanged."""
        parts = [sketch for sketch in sketches if sketch.count]
        result = cls()
        if not parts:
            return result
        result._zero_count = sum(sketch._zero_count for sketch in parts)
        result._sum_ns = sum(sketch._sum_ns for sketch in parts)
        result._min = min(sketch._min for sketch in parts)
        result._max = max(sketch._max for sketch in parts)
        with_buckets = [sketch for sketch in parts if len(sketch._keys)]
        if len(with_buckets) == 1:
            result._keys = with_buckets[0]._keys.copy()
            result._counts = with_buckets[0]._counts.copy()
        elif with_buckets:
            result._keys, result._counts = _combine(
                [sketch._keys for sketch in with_buckets],
                [sketch._counts for sketch in with_buckets],
            )
        return result

    def merge(self, other: "Sketch") -> None:
        """Add ``other``'s values to this sketch."""
        combined = Sketch.merged([self, other])
        for slot in self.__slots__:
            setattr(self, slot, getattr(combined, slot))

    def add_many(self, values: npt.ArrayLike) -> None:
        self.merge(Sketch.from_values(values))

    def copy(self) -> "Sketch":
        return Sketch.merged([self])

    @property
    def count(self) -> int:
        return self._zero_count + int(self._counts.sum())

    @property
    def zero_count(self) -> int:
        return self._zero_count

    @property
    def sum_ns(self) -> int:
        return self._sum_ns

    @property
    def sum(self) -> float:
        """Sum of the values in milliseconds, from the nanosecond-rounded values."""
        return self._sum_ns / NS_PER_MS

    @property
    def mean(self) -> float | None:
        count = self.count
        return self._sum_ns / count / NS_PER_MS if count else None

    @property
    def min(self) -> float | None:
        return self._min if self.count else None

    @property
    def max(self) -> float | None:
        return self._max if self.count else None

    def buckets(self) -> dict[int, int]:
        return dict(zip(self._keys.tolist(), self._counts.tolist(), strict=True))

    def quantile(self, q: float, *, rule: Rule = "nearest") -> float | None:
        return self.quantiles([q], rule=rule)[0]

    def count_above(self, ms: float) -> int:
        """How many values lie above ``ms``: exact but for the values within 1 % of it,
        which count by their bucket's value (as a quantile reads them)."""
        if not self._keys.size:
            return 0
        values = np.array([value(int(key)) for key in self._keys.tolist()])
        return int(self._counts[values > ms].sum())

    def histogram(self, bins: int = 48) -> list[tuple[float, float, int]]:
        """Counts in ``bins`` equal steps of log(value) from the smallest bucket to the
        largest, as (low ms, high ms, count); zeros first as (0, smallest, count).

        The sketch's own buckets are 2 % wide, far finer than a chart can show, so
        whole buckets are added up into the wider bins (a bucket goes to the bin
        holding its value); the counts are exact, the edges within 1 %.
        """
        result: list[tuple[float, float, int]] = []
        if not self.count:
            return result
        if self._keys.size:
            low_key, high_key = int(self._keys[0]), int(self._keys[-1])
            width = max(1, math.ceil((high_key - low_key + 1) / bins))
            groups = (self._keys - low_key) // width
            totals = np.bincount(groups, weights=self._counts).astype(np.int64)
            for group, total in enumerate(totals.tolist()):
                first = low_key + group * width
                low, high = value(first) / GAMMA**0.5, value(first + width - 1) * GAMMA**0.5
                result.append((low, high, int(total)))
        if self._zero_count:
            smallest = result[0][0] if result else MIN_INDEXABLE_MS
            result.insert(0, (0.0, smallest, self._zero_count))
        return result

    def quantiles(self, qs: Sequence[float], *, rule: Rule = "nearest") -> list[float | None]:
        """Values at the quantiles ``qs`` (each in [0, 1]); None for an empty sketch."""
        if any(not 0 <= q <= 1 for q in qs):
            raise ValueError("quantiles must be between 0 and 1")
        if rule not in ("nearest", "ddsketch"):
            raise ValueError(f"unknown quantile rule {rule!r}")
        count = self.count
        if not count:
            return [None for _ in qs]
        running = np.cumsum(self._counts)
        results: list[float | None] = []
        for q in qs:
            rank = _nearest_rank(q, count) if rule == "nearest" else q * (count - 1)
            if rank < self._zero_count:
                results.append(0.0)
                continue
            index = int(np.searchsorted(running, rank - self._zero_count, side="right"))
            results.append(value(int(self._keys[min(index, len(self._keys) - 1)])))
        return results

    def to_bytes(self) -> bytes:
        return sketch_codec.encode(
            sketch_codec.SketchParts(
                self._keys, self._counts, self._zero_count, self._sum_ns, self._min, self._max
            )
        )

    @classmethod
    def from_bytes(cls, data: bytes) -> "Sketch":
        """Decode ``to_bytes`` output; raises ValueError for anything else."""
        parts = sketch_codec.decode(data)
        _check_consistent(parts)
        return cls._from_checked_parts(parts)

    @classmethod
    def _from_checked_parts(cls, parts: sketch_codec.SketchParts) -> "Sketch":
        """A sketch of decoded parts that passed every check of ``from_bytes``."""
        sketch = cls.__new__(cls)
        sketch._keys, sketch._counts = parts.keys, parts.counts
        sketch._zero_count, sketch._sum_ns = parts.zero_count, parts.sum_ns
        sketch._min, sketch._max = parts.min + 0.0, parts.max + 0.0
        return sketch

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sketch):
            return NotImplemented
        return (
            self._zero_count == other._zero_count
            and self._sum_ns == other._sum_ns
            and self._min == other._min
            and self._max == other._max
            and np.array_equal(self._keys, other._keys)
            and np.array_equal(self._counts, other._counts)
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<Sketch count={self.count} min={self.min} max={self.max} sum={self.sum}>"


def _check_consistent(parts: sketch_codec.SketchParts) -> None:
    count = parts.zero_count + int(parts.counts.sum())
    if not count:
        if parts.sum_ns:
            raise ValueError("empty sketch has a non-zero sum")
        return
    low, high = parts.min, parts.max
    if not (0 <= low <= high <= MAX_VALUE_MS):
        raise ValueError("sketch min and max are out of range")
    if parts.zero_count and low > MIN_INDEXABLE_MS:
        raise ValueError("sketch min disagrees with its zero count")
    if not parts.zero_count and (low <= MIN_INDEXABLE_MS or key(low) != parts.keys[0]):
        raise ValueError("sketch min is not in its first bucket")
    if len(parts.keys) == 0:
        if high > MIN_INDEXABLE_MS:
            raise ValueError("sketch max disagrees with its buckets")
    elif high <= MIN_INDEXABLE_MS or key(high) != parts.keys[-1]:
        raise ValueError("sketch max is not in its last bucket")
    low_ns, high_ns = round(low * NS_PER_MS), round(high * NS_PER_MS)
    if not count * low_ns <= parts.sum_ns <= count * high_ns:
        raise ValueError("sketch sum is outside count x min .. count x max")
