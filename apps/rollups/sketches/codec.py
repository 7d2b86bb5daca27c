"""Compact, versioned binary form of a latency sketch.

Version 1, integers as unsigned LEB128 varints unless said otherwise::

    u8       version (1)
    u8       layout: bit 0 is the key layout (0 gaps, 1 bitmap), bits 1-2 the
             count width code (0..3 for 1, 2, 4 or 8 bits per count)
    varint   zero_count
    varint   bucket count (buckets with a non-zero count)
    varint   sum in nanoseconds
    f64 x 2  min, max (little endian), only when the sketch is not empty
    then, only when there are buckets:
    varint   first key, zigzag encoded
    gaps:    a varint per further bucket, the gap to the previous key minus one
    bitmap:  varint last key minus first key, then one bit per key from first to
             last (least significant bit first), set where the bucket is present
    counts:  a field of the chosen width per bucket, packed from the least
             significant bits, holding count - 1; the all-ones field means "more"
             and count - 2**width follows as a varint after the fields, in order

The encoder picks the smallest key layout (gaps on a tie) and count width (the
narrowest on a tie), so equal sketches encode to equal bytes. Gaps suit a few
scattered buckets, the bitmap dense ones as in a minute of latencies; counts are
mostly 1 to 3 in a minute sketch and larger in an hour or a day.
Anything malformed raises ValueError; the semantic checks that need the key
mapping (min and max in the first and last bucket, the sum between count x min and
count x max) live in ``Sketch.from_bytes``.
"""

import struct
from bisect import bisect_left
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

VERSION = 1
GAPS = 0
BITMAP = 1
# Bits per bucket count; the encoder picks the width giving the fewest bytes.
WIDTHS = (1, 2, 4, 8)
# Keys of the logarithmic mapping at 1 % stay within about +-36,000 for any double.
MAX_ABS_KEY = 1 << 16
# Keeps counts and their running totals exact in int64.
MAX_COUNT = 1 << 62
_MIN_MAX = struct.Struct("<dd")
_VARINT_STEPS = [1 << shift for shift in range(7, 63, 7)]
# _FIELDS[width][byte] lists the count fields packed in that byte, low bits first.
_FIELDS = {
    width: (
        (np.arange(256)[:, None] >> (np.arange(8 // width) * width)) & ((1 << width) - 1)
    ).astype(np.int64)
    for width in WIDTHS
}
_FIELD_WEIGHTS = {width: 1 << (np.arange(8 // width) * width) for width in WIDTHS}


@dataclass(frozen=True)
class SketchParts:
    keys: NDArray[np.int64]
    counts: NDArray[np.int64]
    zero_count: int
    sum_ns: int
    min: float
    max: float


def _varint(value: int) -> bytes:
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _zigzag(value: int) -> int:
    return value * 2 if value >= 0 else -value * 2 - 1


def _unzigzag(value: int) -> int:
    return value >> 1 if not value & 1 else -((value + 1) >> 1)


def _escapes_size(ordered: list[int], floor: int) -> int:
    """Bytes of the varints ``count - floor`` for the counts >= ``floor``."""
    total = 0
    for step in (0, *_VARINT_STEPS):
        above = len(ordered) - bisect_left(ordered, floor + step)
        if not above:
            break
        total += above
    return total


def _counts_sizes(counts: NDArray[np.int64]) -> list[int]:
    """Encoded size of the counts at each of WIDTHS."""
    ordered = np.sort(counts).tolist()
    return [-(-len(ordered) * width // 8) + _escapes_size(ordered, 1 << width) for width in WIDTHS]


def _encode_counts(counts: NDArray[np.int64], width: int) -> bytes:
    escape = (1 << width) - 1
    fields = np.minimum(counts - 1, escape)
    per_byte = 8 // width
    if per_byte > 1:
        padded = np.zeros(-(-len(fields) // per_byte) * per_byte, dtype=np.int64)
        padded[: len(fields)] = fields
        fields = padded.reshape(-1, per_byte) @ _FIELD_WEIGHTS[width]
    escaped = counts[counts > escape]
    tail = b"".join(_varint(count - escape - 1) for count in escaped.tolist())
    return fields.astype(np.uint8).tobytes() + tail


def _encode_keys(keys: NDArray[np.int64], head: bytearray) -> None:
    gaps = np.diff(keys) - 1
    gaps_size = len(gaps) + int(np.searchsorted(_VARINT_STEPS, gaps, side="right").sum())
    span = int(keys[-1] - keys[0])
    if len(_varint(span)) + span // 8 + 1 < gaps_size:
        head[1] = BITMAP
        bits = np.zeros(span + 1, dtype=np.uint8)
        bits[keys - keys[0]] = 1
        head += _varint(span) + np.packbits(bits, bitorder="little").tobytes()
    elif gaps_size == len(gaps):
        head += gaps.astype(np.uint8).tobytes()
    else:
        head += b"".join(_varint(gap) for gap in gaps.tolist())


def encode(parts: SketchParts) -> bytes:
    keys, counts = parts.keys, parts.counts
    head = bytearray((VERSION, GAPS))
    head += _varint(parts.zero_count) + _varint(len(keys)) + _varint(parts.sum_ns)
    if parts.zero_count or len(keys):
        head += _MIN_MAX.pack(parts.min, parts.max)
    if not len(keys):
        return bytes(head)
    head += _varint(_zigzag(int(keys[0])))
    _encode_keys(keys, head)
    sizes = _counts_sizes(counts)
    width_code = sizes.index(min(sizes))
    head[1] |= width_code << 1
    return bytes(head) + _encode_counts(counts, WIDTHS[width_code])


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
    first = _unzigzag(reader.varint("first key", max_bytes=3))
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
    counts = _FIELDS[width][packed].reshape(-1)[:count] + 1
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
        low, high = _MIN_MAX.unpack(reader.take(_MIN_MAX.size, "min and max"))
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
