"""Reading one stored sketch, checking every field; the reference for ``decode_many``.

Anything malformed raises ValueError with what was wrong.
"""

import numpy as np
from numpy.typing import NDArray

from apps.rollups.sketches.codec.layout import (
    FIELDS,
    GAPS,
    MAX_ABS_KEY,
    MAX_COUNT,
    MIN_MAX,
    VERSION,
    WIDTHS,
    SketchParts,
    unzigzag,
)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def varint(self, what: str, max_bytes: int = 10) -> int:
        data, pos = self.data, self.pos
        if pos < len(data) and data[pos] < 0x80:
            self.pos = pos + 1
            return data[pos]
        value = shift = 0
        for length in range(1, max_bytes + 1):
            if self.pos >= len(self.data):
                raise ValueError(f"sketch bytes end inside the {what}")
            byte = self.data[self.pos]
            self.pos += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                if length > 1 and byte == 0:
                    raise ValueError(f"sketch {what} is not minimally encoded")
                return value
            shift += 7
        raise ValueError(f"sketch {what} is too long")

    def take(self, size: int, what: str) -> bytes:
        if self.pos + size > len(self.data):
            raise ValueError(f"sketch bytes end inside the {what}")
        chunk = self.data[self.pos : self.pos + size]
        self.pos += size
        return chunk

    def array(self, size: int, what: str) -> NDArray[np.uint8]:
        if self.pos + size > len(self.data):
            raise ValueError(f"sketch bytes end inside the {what}")
        chunk = np.frombuffer(self.data, dtype=np.uint8, count=size, offset=self.pos)
        self.pos += size
        return chunk


def _read_gaps(reader: _Reader, count: int) -> NDArray[np.int64]:
    """``count`` short varints at once; gaps are below 2**17, so at most 3 bytes."""
    if not count:
        return np.empty(0, dtype=np.int64)
    buf = np.frombuffer(reader.data, dtype=np.uint8, offset=reader.pos)
    ends = np.flatnonzero(buf < 0x80)
    if len(ends) < count:
        raise ValueError("sketch bytes end inside the bucket keys")
    ends = ends[:count]
    size = int(ends[-1]) + 1
    reader.pos += size
    if size == count:
        return buf[:size].astype(np.int64)
    starts = np.concatenate(([0], ends[:-1] + 1))
    lengths = ends - starts + 1
    if lengths.max() > 3 or (buf[ends[lengths > 1]] == 0).any():
        raise ValueError("sketch bucket key gap is malformed")
    owner = np.repeat(np.arange(count), lengths)
    shifts = (np.arange(size) - starts[owner]) * 7
    digits = (buf[:size] & 0x7F).astype(np.int64) << shifts
    return np.add.reduceat(digits, starts)


def _read_bitmap(reader: _Reader, first: int, count: int) -> NDArray[np.int64]:
    span = reader.varint("key span", max_bytes=3)
    start = reader.pos
    packed = reader.array(span // 8 + 1, "bucket bitmap")
    data, last_bit = reader.data, span % 8
    last = data[start + span // 8]
    if not data[start] & 1 or not (last >> last_bit) & 1 or last >> (last_bit + 1):
        raise ValueError("sketch bucket bitmap is malformed")
    keys = np.flatnonzero(np.unpackbits(packed, bitorder="little")) + first
    if len(keys) != count:
        raise ValueError("sketch bucket bitmap disagrees with the bucket count")
    return keys


def _read_keys(reader: _Reader, layout: int, count: int) -> NDArray[np.int64]:
    first = unzigzag(reader.varint("first key", max_bytes=3))
    if layout == GAPS:
        keys = np.empty(count, dtype=np.int64)
        keys[0] = first
        np.cumsum(_read_gaps(reader, count - 1) + 1, out=keys[1:])
        keys[1:] += first
    else:
        keys = _read_bitmap(reader, first, count)
    if abs(int(keys[0])) > MAX_ABS_KEY or abs(int(keys[-1])) > MAX_ABS_KEY:
        raise ValueError("sketch bucket key is out of range")
    return keys


def _read_counts(reader: _Reader, count: int, width: int) -> NDArray[np.int64]:
    per_byte = 8 // width
    packed = reader.array(-(-count // per_byte), "bucket counts")
    unused = count % per_byte
    if unused and reader.data[reader.pos - 1] >> (unused * width):
        raise ValueError("sketch bucket counts are malformed")
    counts = FIELDS[width][packed].reshape(-1)[:count] + 1
    if reader.pos == len(reader.data):
        # Every escaped count is followed by at least one byte: none here.
        if (counts == 1 << width).any():
            raise ValueError("sketch bytes end inside the bucket count")
        return counts
    extras = 0
    for index in np.flatnonzero(counts == 1 << width).tolist():
        extra = reader.varint("bucket count")
        extras += extra
        if extras >= MAX_COUNT:
            raise ValueError("sketch bucket counts are too large")
        counts[index] += extra
    return counts


def decode(data: bytes) -> SketchParts:
    """Parse the structure; raises ValueError on anything malformed."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise ValueError("sketch encoding must be bytes")
    reader = _Reader(bytes(data))
    if len(reader.data) < 2:
        raise ValueError("sketch bytes are too short")
    version, layout, width_code = reader.data[0], reader.data[1] & 1, reader.data[1] >> 1
    reader.pos = 2
    if version != VERSION:
        raise ValueError(f"unsupported sketch encoding version {version}")
    if width_code >= len(WIDTHS):
        raise ValueError(f"unknown sketch layout byte {reader.data[1]}")
    zero_count = reader.varint("zero count")
    bucket_count = reader.varint("bucket count")
    sum_ns = reader.varint("sum")
    if zero_count >= MAX_COUNT or bucket_count > 2 * MAX_ABS_KEY + 1:
        raise ValueError("sketch counts are out of range")
    low, high = (np.inf, -np.inf)
    if zero_count or bucket_count:
        low, high = MIN_MAX.unpack(reader.take(MIN_MAX.size, "min and max"))
    if bucket_count:
        keys = _read_keys(reader, layout, bucket_count)
        counts = _read_counts(reader, bucket_count, WIDTHS[width_code])
    elif reader.data[1]:
        raise ValueError("sketch without buckets has a non-zero layout byte")
    else:
        keys, counts = np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    if reader.pos != len(reader.data):
        raise ValueError("sketch bytes have trailing data")
    return SketchParts(keys, counts, zero_count, sum_ns, low, high)
