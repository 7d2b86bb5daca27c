"""The compact, versioned binary form of a latency sketch: its layout and its parts.

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
MIN_MAX = struct.Struct("<dd")
VARINT_STEPS = [1 << shift for shift in range(7, 63, 7)]
# FIELDS[width][byte] lists the count fields packed in that byte, low bits first.
FIELDS = {
    width: (
        (np.arange(256)[:, None] >> (np.arange(8 // width) * width)) & ((1 << width) - 1)
    ).astype(np.int64)
    for width in WIDTHS
}
FIELD_WEIGHTS = {width: 1 << (np.arange(8 // width) * width) for width in WIDTHS}


@dataclass(frozen=True)
class SketchParts:
    keys: NDArray[np.int64]
    counts: NDArray[np.int64]
    zero_count: int
    sum_ns: int
    min: float
    max: float


def zigzag(value: int) -> int:
    return value * 2 if value >= 0 else -value * 2 - 1


def unzigzag(value: int) -> int:
    return value >> 1 if not value & 1 else -((value + 1) >> 1)
