"""Decoding many stored sketches at once into flat arrays (the layout of ``layout``).

A dashboard window reads thousands of small sketches; decoding them one by one
costs about 20 µs each, nearly all of it per-call Python work. Here the blobs
are joined into one buffer and every field is read for the whole batch with a
few numpy operations.

The batch decoder only accepts what ``read_one.decode`` accepts, with the
same parts. It leaves to that decoder (``BatchParts.rejected``) any blob it does
not fully check: malformed ones, whose error the scalar decoder words, and valid
but unusual ones (a varint of ten bytes, a bucket count above 2**40) that no
rollup writes. The checks that need the key mapping stay with the caller, as
``Sketch.from_bytes`` keeps them for ``decode``.
"""

from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import pairwise

import numpy as np
from numpy.typing import NDArray

from apps.rollups.sketches.codec.layout import (
    BITMAP,
    FIELDS,
    MAX_ABS_KEY,
    MAX_COUNT,
    VERSION,
    WIDTHS,
)

Int64s = NDArray[np.int64]
Bools = NDArray[np.bool_]
Rows = Int64s | slice

# Escaped counts below this keep every sum of a batch's counts exact in int64;
# larger ones (no rollup holds 2**40 samples) are left to the scalar decoder.
_MAX_FAST_EXTRA = 1 << 40
# Zero bytes after the joined blobs, so that fixed-size reads past a blob's end
# stay inside the buffer (each read is then checked against the blob's end).
_PADDING = bytes(32)
_COLUMNS = np.arange(16)
_POPCOUNT = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).sum(axis=1)
# Per count width: the fields packed in each byte value, and how many are escapes.
_FIELD_BYTES = {width: table.astype(np.uint8) for width, table in FIELDS.items()}
_ESCAPES = {width: (table == (1 << width) - 1).sum(axis=1) for width, table in FIELDS.items()}


@dataclass(frozen=True)
class BatchParts:
    """The accepted blobs' parts, one row per blob, and the blobs left to the scalar decoder.

    ``index[i]`` is the input position of the blob of row ``i``; its buckets are
    ``keys`` and ``counts`` from ``offsets[i]``, ``bucket_count[i]`` of them.
    """

    index: Int64s
    zero_count: Int64s
    sum_ns: Int64s
    min: NDArray[np.float64]
    max: NDArray[np.float64]
    bucket_count: Int64s
    offsets: Int64s
    keys: Int64s
    counts: Int64s
    rejected: Int64s


def _ranges(starts: Int64s, lengths: Int64s) -> Int64s:
    """``concatenate([arange(s, s + n) for s, n in zip(starts, lengths)])``."""
    ends = np.cumsum(lengths)
    total = int(ends[-1]) if len(ends) else 0
    return np.arange(total) + np.repeat(starts - ends + lengths, lengths)


def _heads(lengths: Int64s) -> Int64s:
    """Where each of consecutive runs of these lengths starts."""
    return np.cumsum(lengths) - lengths


def _owners(lengths: Int64s) -> Int64s:
    """For each item of consecutive runs of these lengths, the number of its run."""
    return np.repeat(np.arange(len(lengths)), lengths)


class _Failed(Exception):
    """Some blobs of the attempt fail a check: ``ok`` marks those that passed so far."""

    def __init__(self, ok: Bools) -> None:
        self.ok = ok


class _Batch:
    """One attempt at decoding the blobs; each check raises ``_Failed`` if any blob fails it."""

    def __init__(self, data: bytes, lengths: Int64s) -> None:
        self.size = len(data)
        self.buf = np.frombuffer(data + _PADDING, dtype=np.uint8)
        self.ends = np.cumsum(lengths)
        self.starts = self.ends - lengths
        self.ok = np.ones(len(lengths), dtype=bool)
        self._terminators: Int64s | None = None

    def check(self, rows: Rows, passed: Bools) -> None:
        self.ok[rows] &= passed
        if not self.ok.all():
            raise _Failed(self.ok)

    def check_items(self, rows: Int64s, lengths: Int64s, bad: Bools) -> None:
        """Fail the rows owning a bad item, the items being runs of ``lengths`` per row."""
        if bad.any():
            owners = _owners(lengths)[bad]
            self.check(rows, np.bincount(owners, minlength=len(rows)) == 0)

    def window(self, pos: Int64s, width: int) -> NDArray[np.uint8]:
        """``width`` bytes from each position, clamped into the buffer."""
        return self.buf[np.minimum(pos, self.size)[:, None] + _COLUMNS[:width]]

    def varint(self, rows: Rows, pos: Int64s, max_bytes: int) -> tuple[Int64s, Int64s]:
        """One varint per row at ``pos``: the values and the positions after them."""
        value = np.zeros(len(pos), dtype=np.int64)
        after = np.full(len(pos), self.size + 1, dtype=np.int64)  # past any end until set
        minimal = np.ones(len(pos), dtype=bool)
        going = np.arange(len(pos))
        # Byte by byte over the rows whose varint goes on: most end after one or two.
        for step in range(max_bytes):
            byte = self.buf[np.minimum(pos[going] + step, self.size)]
            value[going] |= (byte & 0x7F).astype(np.int64) << (7 * step)
            ends = byte < 0x80
            if step:
                minimal[going[ends & (byte == 0)]] = False
            after[going[ends]] = pos[going[ends]] + step + 1
            going = going[~ends]
            if not len(going):
                break
        self.check(rows, minimal & (after <= self.ends[rows]))
        return value, after

    def short_varints(self, rows: Int64s, pos: Int64s, count: Int64s) -> tuple[Int64s, Int64s]:
        """``count[i]`` varints of up to 3 bytes from ``pos[i]``: values, flat, and row ends."""
        if self._terminators is None:
            self._terminators = np.flatnonzero(self.buf[: self.size] < 0x80)
        terminators = self._terminators
        first = np.searchsorted(terminators, pos)
        last = np.minimum(first + count - 1, len(terminators) - 1)
        inside = (first + count - 1 < len(terminators)) & (terminators[last] < self.ends[rows])
        self.check(rows, (count == 0) | inside)
        stops = terminators[_ranges(first, count)]
        begins = np.empty_like(stops)
        begins[1:] = stops[:-1] + 1
        begins[_heads(count)[count > 0]] = pos[count > 0]
        length = stops - begins + 1
        values = self.buf[stops].astype(np.int64)
        if len(length) and length.max() > 1:
            self.check_items(rows, count, (length > 3) | ((length > 1) & (values == 0)))
            values = (self.buf[begins] & 0x7F).astype(np.int64)
            for step in (1, 2):
                longer = length > step
                digits = self.buf[begins[longer] + step] & 0x7F
                values[longer] |= digits.astype(np.int64) << (7 * step)
        return values, np.where(count > 0, terminators[last] + 1, pos)

    def tail_varints(self, rows: Int64s, pos: Int64s, count: Int64s) -> Int64s:
        """Values of the varints filling each blob from ``pos``: ``count[i]`` of them, flat."""
        size = self.ends[rows] - pos
        self.check(rows, size >= count)
        tail = self.buf[_ranges(pos, size)]
        last = tail < 0x80
        if len(tail) == count.sum() and last.all():  # one byte each: the usual case
            return tail.astype(np.int64)
        stops = np.flatnonzero(last)
        found = np.bincount(_owners(size)[stops], minlength=len(rows))
        self.check(rows, (found == count) & last[np.cumsum(size) - 1])
        begins = np.concatenate(([0], stops[:-1] + 1))
        length = stops - begins + 1
        self.check_items(rows, count, (length > 9) | ((length > 1) & (tail[stops] == 0)))
        shifts = 7 * (np.arange(len(tail)) - np.repeat(begins, length))
        return np.add.reduceat((tail & 0x7F).astype(np.int64) << shifts, begins)


def _gap_keys(
    batch: _Batch, rows: Int64s, pos: Int64s, first: Int64s, count: Int64s
) -> tuple[Int64s, Int64s]:
    """Keys of gap-layout rows, flat, and the position after each row's gaps."""
    gaps, after = batch.short_varints(rows, pos, count - 1)
    heads = _heads(count)
    steps = np.empty(int(count.sum()), dtype=np.int64)
    inner = np.ones(len(steps), dtype=bool)
    inner[heads] = False
    steps[heads] = first
    steps[inner] = gaps + 1
    running = np.cumsum(steps)
    return running - np.repeat(running[heads] - first, count), after


def _bitmap_keys(
    batch: _Batch, rows: Int64s, pos: Int64s, first: Int64s, count: Int64s
) -> tuple[Int64s, Int64s]:
    """Keys of bitmap-layout rows, flat, and the position after each row's bitmap."""
    span, pos = batch.varint(rows, pos, 3)
    size = span // 8 + 1
    batch.check(rows, pos + size <= batch.ends[rows])
    packed = batch.buf[_ranges(pos, size)]
    byte_heads = _heads(size)
    batch.check(rows, np.add.reduceat(np.take(_POPCOUNT, packed), byte_heads) == count)
    present = np.flatnonzero(np.unpackbits(packed, bitorder="little").view(bool))
    bit_heads, heads = byte_heads * 8, _heads(count)
    # The first bit set, the last one at the span and none after: as the scalar reader checks.
    ends_right = (present[heads] == bit_heads) & (present[heads + count - 1] == bit_heads + span)
    batch.check(rows, ends_right)
    return present + np.repeat(first - bit_heads, count), pos + size


def _counts(batch: _Batch, rows: Int64s, pos: Int64s, count: Int64s, width: int) -> Int64s:
    """Bucket counts of rows with one count width, flat; each blob must end after them."""
    per_byte = 8 // width
    size = -(-count // per_byte)
    batch.check(rows, pos + size <= batch.ends[rows])
    packed = batch.buf[_ranges(pos, size)]
    fields = np.take(_FIELD_BYTES[width], packed, axis=0).reshape(-1)
    if per_byte > 1:
        spare = size * per_byte - count
        unused = _ranges(_heads(size) * per_byte + count, spare)
        batch.check_items(rows, spare, fields[unused] != 0)
        kept = np.ones(len(fields), dtype=bool)
        kept[unused] = False
        fields = fields[kept]
    counts = fields.astype(np.int64) + 1
    escapes = np.add.reduceat(np.take(_ESCAPES[width], packed), _heads(size))
    after = pos + size
    some = escapes > 0
    batch.check(rows, some | (after == batch.ends[rows]))
    if some.any():
        extras = batch.tail_varints(rows[some], after[some], escapes[some])
        batch.check_items(rows[some], escapes[some], extras >= _MAX_FAST_EXTRA)
        counts[counts == 1 << width] += extras
    return counts


def _concatenate(arrays: list[Int64s]) -> Int64s:
    return np.concatenate(arrays) if arrays else np.empty(0, dtype=np.int64)


def _attempt(blobs: Sequence[bytes | bytearray | memoryview]) -> BatchParts:
    """Every blob decoded, or ``_Failed`` naming those that passed the checks so far."""
    lengths = np.fromiter(map(len, blobs), dtype=np.int64, count=len(blobs))
    data = b"".join(blobs)
    if len(data) != int(lengths.sum()):  # memoryviews of items wider than a byte
        raise _Failed(np.zeros(len(blobs), dtype=bool))
    batch = _Batch(data, lengths)
    every = slice(None)
    head = batch.window(batch.starts, 2)
    layout = head[:, 1].astype(np.int64)
    batch.check(every, (lengths >= 2) & (head[:, 0] == VERSION) & (layout < 2 * len(WIDTHS)))
    zero_count, pos = batch.varint(every, batch.starts + 2, 9)
    bucket_count, pos = batch.varint(every, pos, 3)
    sum_ns, pos = batch.varint(every, pos, 9)
    batch.check(every, (zero_count < MAX_COUNT) & (bucket_count <= 2 * MAX_ABS_KEY + 1))
    stored = (zero_count > 0) | (bucket_count > 0)
    bounds = batch.window(pos, 16).view("<f8")
    low = np.where(stored, bounds[:, 0], np.inf)
    high = np.where(stored, bounds[:, 1], -np.inf)
    pos = pos + 16 * stored
    buckets = bucket_count > 0
    batch.check(every, (pos <= batch.ends) & (buckets | ((layout == 0) & (pos == batch.ends))))

    # Rows ordered: without buckets, then gap layout, then bitmap, each by count
    # width, so that each step below reads one contiguous run of rows.
    kind = np.where(buckets, (layout & 1) * len(WIDTHS) + (layout >> 1), -1)
    order = np.argsort(kind, kind="stable")
    rows = order[buckets[order]]
    kinds = kind[rows]
    count = bucket_count[rows]
    first, pos = batch.varint(rows, pos[rows], 3)
    first = (first >> 1) ^ -(first & 1)  # zigzag
    runs = np.searchsorted(kinds, np.arange(2 * len(WIDTHS) + 1)).tolist()
    layouts = np.searchsorted(kinds, [0, BITMAP * len(WIDTHS), 2 * len(WIDTHS)]).tolist()
    key_parts = [
        read(batch, rows[a:b], pos[a:b], first[a:b], count[a:b])
        for read, (a, b) in zip((_gap_keys, _bitmap_keys), pairwise(layouts), strict=True)
        if b > a
    ]
    keys = _concatenate([part for part, _ in key_parts])
    pos = _concatenate([after for _, after in key_parts])
    last = keys[_heads(count) + count - 1]
    batch.check(rows, (np.abs(first) <= MAX_ABS_KEY) & (np.abs(last) <= MAX_ABS_KEY))
    counts = _concatenate(
        [
            _counts(batch, rows[a:b], pos[a:b], count[a:b], WIDTHS[k % len(WIDTHS)])
            for k, (a, b) in enumerate(pairwise(runs))
            if b > a
        ]
    )
    return BatchParts(
        index=order,
        zero_count=zero_count[order],
        sum_ns=sum_ns[order],
        min=low[order],
        max=high[order],
        bucket_count=bucket_count[order],
        offsets=_heads(bucket_count[order]),
        keys=keys,
        counts=counts,
        rejected=np.empty(0, dtype=np.int64),
    )


def decode_many(blobs: Sequence[bytes | bytearray | memoryview]) -> BatchParts:
    """The parts of every blob the batch decoder accepts; ``rejected`` lists the others.

    A blob failing a check is dropped and the rest decoded again, so that one odd
    blob costs a second pass, not the batch.
    """
    candidates = np.arange(len(blobs))
    subset = blobs
    while len(candidates):
        try:
            parts = _attempt(subset)
        except _Failed as failed:
            candidates = candidates[failed.ok]
        except TypeError:  # not bytes: the scalar decoder says so
            is_bytes = [isinstance(blob, bytes | bytearray | memoryview) for blob in subset]
            if all(is_bytes):
                raise
            candidates = candidates[is_bytes]
        else:
            if len(candidates) == len(blobs):
                return parts
            rejected = np.setdiff1d(np.arange(len(blobs)), candidates)
            return replace(parts, index=candidates[parts.index], rejected=rejected)
        subset = [blobs[i] for i in candidates.tolist()]
    empty = np.empty(0, dtype=np.int64)
    return BatchParts(
        index=empty,
        zero_count=empty,
        sum_ns=empty,
        min=np.empty(0),
        max=np.empty(0),
        bucket_count=empty,
        offsets=empty,
        keys=empty,
        counts=empty,
        rejected=np.arange(len(blobs)),
    )
