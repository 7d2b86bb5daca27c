"""Writing a sketch in the layout of ``layout``: the smallest key layout and count width."""

from bisect import bisect_left

import numpy as np
from numpy.typing import NDArray

from apps.core.varint import varint
from apps.rollups.sketches.codec.layout import (
    BITMAP,
    FIELD_WEIGHTS,
    GAPS,
    MIN_MAX,
    VARINT_STEPS,
    VERSION,
    WIDTHS,
    SketchParts,
    zigzag,
)


def _escapes_size(ordered: list[int], floor: int) -> int:
    """Bytes of the varints ``count - floor`` for the counts >= ``floor``."""
    total = 0
    for step in (0, *VARINT_STEPS):
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
        fields = padded.reshape(-1, per_byte) @ FIELD_WEIGHTS[width]
    escaped = counts[counts > escape]
    tail = b"".join(varint(count - escape - 1) for count in escaped.tolist())
    return fields.astype(np.uint8).tobytes() + tail


def _encode_keys(keys: NDArray[np.int64], head: bytearray) -> None:
    gaps = np.diff(keys) - 1
    gaps_size = len(gaps) + int(np.searchsorted(VARINT_STEPS, gaps, side="right").sum())
    span = int(keys[-1] - keys[0])
    if len(varint(span)) + span // 8 + 1 < gaps_size:
        head[1] = BITMAP
        bits = np.zeros(span + 1, dtype=np.uint8)
        bits[keys - keys[0]] = 1
        head += varint(span) + np.packbits(bits, bitorder="little").tobytes()
    elif gaps_size == len(gaps):
        head += gaps.astype(np.uint8).tobytes()
    else:
        head += b"".join(varint(gap) for gap in gaps.tolist())


def encode(parts: SketchParts) -> bytes:
    keys, counts = parts.keys, parts.counts
    head = bytearray((VERSION, GAPS))
    head += varint(parts.zero_count) + varint(len(keys)) + varint(parts.sum_ns)
    if parts.zero_count or len(keys):
        head += MIN_MAX.pack(parts.min, parts.max)
    if not len(keys):
        return bytes(head)
    head += varint(zigzag(int(keys[0])))
    _encode_keys(keys, head)
    sizes = _counts_sizes(counts)
    width_code = sizes.index(min(sizes))
    head[1] |= width_code << 1
    return bytes(head) + _encode_counts(counts, WIDTHS[width_code])
