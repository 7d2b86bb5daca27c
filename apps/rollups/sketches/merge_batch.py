"""Stored sketches decoded and merged per group in one pass.

A window over rollups merges thousands of stored sketches into a few dozen (one
per stage and measure, or one per chart point). Decoding each into a Sketch and
merging them pairwise costs ~20 µs a sketch; here the whole batch is decoded
into flat arrays (``codec.decode_many``), checked as ``Sketch.from_bytes``
checks one sketch, and the buckets of every group are added up with a single
``np.bincount``.

``merged_groups`` gives exactly what ``Sketch.merged`` of ``Sketch.from_bytes``
of each group's blobs gives, and raises the same ValueError for the first
malformed blob: any blob the batch path does not fully check is decoded by
``Sketch.from_bytes`` itself.
"""

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from numpy.typing import NDArray

from apps.core.time import NS_PER_MS
from apps.rollups.sketches.codec import BatchParts, SketchParts, decode_many
from apps.rollups.sketches.ddsketch import MAX_VALUE_MS, MIN_INDEXABLE_MS, Sketch, keys

Blob = bytes | bytearray | memoryview
# Below this, products and sums of int64 values cannot overflow, with room for
# the rounding of the float estimate that decides it.
_INT64_SAFE = float(1 << 62)


def merged_groups(
    *, blobs: Sequence[Blob], groups: npt.ArrayLike, group_count: int
) -> list[Sketch]:
    """For each group ``g`` in ``range(group_count)``, the merge of the blobs labelled ``g``.

    ``groups`` holds one label per blob; groups without blobs give empty sketches.
    """
    labels = np.asarray(groups, dtype=np.int64).reshape(-1)
    if len(labels) != len(blobs):
        raise ValueError("give one group label per sketch")
    if len(labels) and not (labels.min() >= 0 and labels.max() < group_count):
        raise ValueError("group labels must be in range(group_count)")
    parts = decode_many(blobs)
    checked = _consistent(parts)
    # Left to the scalar path in input order, so that the first malformed blob is
    # the one reported, as when decoding one by one.
    others = np.sort(np.concatenate([parts.rejected, parts.index[~checked]]))
    late = [(int(labels[i]), Sketch.from_bytes(blobs[i])) for i in others.tolist()]
    if not checked.all():
        parts = _rows(parts, checked)
    merged = _merge(parts, labels[parts.index], group_count)
    for group, sketch in late:
        merged[group] = Sketch.merged([merged[group], sketch])
    return merged


def merged_from_bytes(blobs: Sequence[Blob]) -> Sketch:
    """``Sketch.merged(Sketch.from_bytes(blob) for blob in blobs)``, in one pass."""
    return merged_groups(blobs=blobs, groups=np.zeros(len(blobs), np.int64), group_count=1)[0]


def _consistent(parts: BatchParts) -> NDArray[np.bool_]:
    """Rows passing the checks of ``Sketch.from_bytes``; False also where int64 cannot tell."""
    starts, sizes, zero = parts.offsets, parts.bucket_count, parts.zero_count
    running = np.concatenate(([0], np.cumsum(parts.counts)))
    count = zero + running[starts + sizes] - running[starts]
    low, high = parts.min, parts.max
    empty, buckets = count == 0, sizes > 0
    with np.errstate(invalid="ignore"):
        ok = np.where(empty, parts.sum_ns == 0, (low >= 0) & (low <= high) & (high <= MAX_VALUE_MS))
    ok &= ~((zero > 0) & (low > MIN_INDEXABLE_MS))
    ok &= empty | buckets | (high <= MIN_INDEXABLE_MS)
    # Both ends of the stored range must fall in the first and last buckets.
    for bound, among, bucket in (
        (low, ~empty & (zero == 0), starts),
        (high, buckets, starts + sizes - 1),
    ):
        rows = ok & among
        indexable = bound[rows] > MIN_INDEXABLE_MS
        expected = parts.keys[bucket[rows]]
        found = np.zeros(len(expected), dtype=bool)
        found[indexable] = keys(bound[rows][indexable]) == expected[indexable]
        ok[rows] &= found
    full = ok & ~empty
    low_ns = np.zeros(len(low), dtype=np.int64)
    high_ns = np.zeros(len(high), dtype=np.int64)
    low_ns[full] = np.rint(low[full] * NS_PER_MS)
    high_ns[full] = np.rint(high[full] * NS_PER_MS)
    fits = count.astype(np.float64) * (high_ns + 1.0) < _INT64_SAFE
    within = (count * low_ns <= parts.sum_ns) & (parts.sum_ns <= count * high_ns)
    return ok & (empty | (fits & within))


def _rows(parts: BatchParts, keep: NDArray[np.bool_]) -> BatchParts:
    entries = np.repeat(keep, parts.bucket_count)
    sizes = parts.bucket_count[keep]
    return BatchParts(
        index=parts.index[keep],
        zero_count=parts.zero_count[keep],
        sum_ns=parts.sum_ns[keep],
        min=parts.min[keep],
        max=parts.max[keep],
        bucket_count=sizes,
        offsets=np.cumsum(sizes) - sizes,
        keys=parts.keys[entries],
        counts=parts.counts[entries],
        rejected=parts.rejected,
    )


def _group_totals(labels: NDArray[np.int64], values: NDArray[np.int64], groups: int) -> list[int]:
    if float(values.sum(dtype=np.float64)) < _INT64_SAFE:
        totals = np.zeros(groups, dtype=np.int64)
        np.add.at(totals, labels, values)
        return [int(total) for total in totals.tolist()]
    exact = [0] * groups
    for label, value in zip(labels.tolist(), values.tolist(), strict=True):
        exact[label] += value
    return exact


def _merge(parts: BatchParts, labels: NDArray[np.int64], groups: int) -> list[Sketch]:
    zero = _group_totals(labels, parts.zero_count, groups)
    sums = _group_totals(labels, parts.sum_ns, groups)
    low = np.full(groups, np.inf)
    np.minimum.at(low, labels, parts.min + 0.0)
    high = np.full(groups, -np.inf)
    np.maximum.at(high, labels, parts.max + 0.0)

    # Each group gets its own run of bins, from its lowest key to its highest.
    has = parts.bucket_count > 0
    first = parts.keys[parts.offsets[has]]
    last = parts.keys[parts.offsets[has] + parts.bucket_count[has] - 1]
    group_low = np.zeros(groups, dtype=np.int64)
    group_high = np.full(groups, -1, dtype=np.int64)
    if has.any():
        group_low[:] = first.max()
        group_high[:] = first.max() - 1
        np.minimum.at(group_low, labels[has], first)
        np.maximum.at(group_high, labels[has], last)
    width = group_high - group_low + 1
    base = np.cumsum(width) - width
    bins = int(width.sum())
    index = parts.keys + np.repeat((base - group_low)[labels], parts.bucket_count)
    tallies = np.zeros(bins, dtype=np.int64)
    np.add.at(tallies, index, parts.counts)
    present = np.flatnonzero(tallies)
    cuts = np.searchsorted(present, np.append(base, bins)).tolist()
    low_list, high_list = low.tolist(), high.tolist()
    shift = (group_low - base).tolist()
    return [
        Sketch._from_checked_parts(
            SketchParts(
                keys=present[cuts[g] : cuts[g + 1]] + shift[g],
                counts=tallies[present[cuts[g] : cuts[g + 1]]],
                zero_count=zero[g],
                sum_ns=sums[g],
                min=low_list[g],
                max=high_list[g],
            )
        )
        for g in range(groups)
    ]
