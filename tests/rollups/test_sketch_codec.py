"""Binary encoding of sketches: exact round trips, compact sizes, garbage refused."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apps.rollups.sketches import codec as sketch_codec
from apps.rollups.sketches.codec import layout as codec_layout
from apps.rollups.sketches.codec import write as codec_write
from apps.rollups.sketches.ddsketch import MAX_VALUE_MS, Sketch


def lognormal_minute(count: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).lognormal(math.log(250), 0.5, count)


def fields(sketch: Sketch) -> tuple[object, ...]:
    return (
        sketch.buckets(),
        sketch.zero_count,
        sketch.sum_ns,
        sketch.min,
        sketch.max,
        sketch.count,
    )


SAMPLES = {
    "empty": np.array([]),
    "zeros only": np.zeros(5),
    "one value": np.array([87.25]),
    "scattered": np.array([0.001, 3.0, 4000.0, 9e6]),
    "minute": lognormal_minute(100, 1),
    "hour": lognormal_minute(20_000, 2),
    "huge counts": np.repeat([10.0, 20.0, 40.0], [3, 70_000, 300]),
    "extremes": np.array([0.0, 5e-324, 1e-300, MAX_VALUE_MS, 1.5]),
}


@pytest.mark.parametrize("name", list(SAMPLES))
def test_round_trip_keeps_every_field(name: str) -> None:
    sketch = Sketch.from_values(SAMPLES[name])
    decoded = Sketch.from_bytes(sketch.to_bytes())
    assert decoded == sketch
    assert fields(decoded) == fields(sketch)
    assert decoded.quantiles([0.5, 0.99]) == sketch.quantiles([0.5, 0.99])


def test_dense_buckets_use_the_bitmap_and_scattered_ones_the_gaps() -> None:
    assert Sketch.from_values(SAMPLES["minute"]).to_bytes()[1] & 1 == codec_layout.BITMAP
    assert Sketch.from_values(SAMPLES["scattered"]).to_bytes()[1] & 1 == codec_layout.GAPS


def test_count_width_follows_the_counts() -> None:
    def width(values: np.ndarray) -> int:
        return codec_layout.WIDTHS[Sketch.from_values(values).to_bytes()[1] >> 1]

    assert width(np.array([1.0, 2.0, 4.0])) == 1
    assert width(np.repeat([1.0, 2.0, 4.0], 200)) == 8


@settings(max_examples=200)
@given(
    st.lists(
        st.one_of(
            st.integers(min_value=1, max_value=70_000),
            # Where an escaped count's varint grows by a byte, for each width.
            st.sampled_from(
                [
                    (1 << w) + step + d
                    for w in (1, 2, 4, 8)
                    for step in (0, 128, 16384)
                    for d in (-1, 0)
                ]
            ),
        ),
        min_size=1,
        max_size=80,
    )
)
def test_count_sizes_used_to_pick_the_width_are_the_encoded_sizes(counts: list[int]) -> None:
    array = np.array(counts, dtype=np.int64)
    encoded = [len(codec_write._encode_counts(array, width)) for width in codec_layout.WIDTHS]
    assert codec_write._counts_sizes(array) == encoded


def test_a_minute_of_100_lognormal_latencies_takes_about_70_bytes() -> None:
    sizes = [len(Sketch.from_values(lognormal_minute(100, seed)).to_bytes()) for seed in range(50)]
    assert np.mean(sizes) <= 72


def test_an_empty_sketch_takes_five_bytes() -> None:
    assert Sketch().to_bytes() == bytes([codec_layout.VERSION, 0, 0, 0, 0])


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "too short"),
        (b"\x01", "too short"),
        (b"\x02\x00\x00\x00\x00", "version 2"),
        (b"\x01\x08\x00\x00\x00", "layout byte"),
        (b"\x01\x01\x00\x00\x00", "non-zero layout byte"),
        (b"\x01\x00\x00\x00\x00\x00", "trailing data"),
        (b"\x01\x00\x00\x00\x05", "non-zero sum"),
        (b"\x01\x00\x80\x00\x00\x00", "not minimally encoded"),
        (b"\x01\x00" + b"\xff" * 11, "too long"),
        (b"\x01\x00\x01\x00\x00", "end inside the min and max"),
    ],
)
def test_malformed_bytes_are_refused_with_a_reason(data: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Sketch.from_bytes(data)


def test_every_truncation_of_a_valid_encoding_is_refused() -> None:
    data = Sketch.from_values([*SAMPLES["huge counts"].tolist(), 0.0, 3.5]).to_bytes()
    for end in range(len(data)):
        with pytest.raises(ValueError, match="sketch"):
            Sketch.from_bytes(data[:end])


def test_non_bytes_are_refused() -> None:
    with pytest.raises(ValueError, match="must be bytes"):
        Sketch.from_bytes("\x01\x00\x00\x00\x00")  # type: ignore[arg-type]


def encoded(values: list[float], *, low: float, high: float, sum_ns: int | None = None) -> bytes:
    """The encoding of ``values`` with min, max and sum replaced."""
    parts = sketch_codec.decode(Sketch.from_values(values).to_bytes())
    return sketch_codec.encode(
        sketch_codec.SketchParts(
            parts.keys,
            parts.counts,
            parts.zero_count,
            parts.sum_ns if sum_ns is None else sum_ns,
            low,
            high,
        )
    )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (encoded([1.0, 50.0], low=60.0, high=50.0), "out of range"),
        (encoded([1.0, 50.0], low=-1.0, high=50.0), "out of range"),
        (encoded([1.0, 50.0], low=math.nan, high=50.0), "out of range"),
        (encoded([1.0, 50.0], low=1.5, high=50.0), "first bucket"),
        (encoded([1.0, 50.0], low=1.0, high=80.0), "last bucket"),
        (encoded([0.0, 50.0], low=1.0, high=50.0), "zero count"),
        (encoded([0.0], low=0.0, high=3.0), "max disagrees"),
        (encoded([0.00001, 0.00002], low=0.00001, high=0.00002, sum_ns=90), "sum is outside"),
    ],
)
def test_inconsistent_fields_are_refused(data: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Sketch.from_bytes(data)


def test_bitmap_disagreeing_with_the_bucket_count_is_refused() -> None:
    data = bytearray(Sketch.from_values(SAMPLES["minute"]).to_bytes())
    data[3] += 1  # bucket count, a one-byte varint for this sketch
    with pytest.raises(ValueError, match="bitmap disagrees"):
        Sketch.from_bytes(bytes(data))


def test_flipping_any_byte_is_refused_or_decodes_to_a_consistent_sketch() -> None:
    data = Sketch.from_values(SAMPLES["minute"]).to_bytes()
    for position in range(len(data)):
        for flip in (0x01, 0x80, 0xFF):
            corrupt = bytearray(data)
            corrupt[position] ^= flip
            try:
                sketch = Sketch.from_bytes(bytes(corrupt))
            except ValueError:
                continue
            assert Sketch.from_bytes(sketch.to_bytes()) == sketch
            assert sketch.count == sketch.zero_count + sum(sketch.buckets().values())


@settings(max_examples=500)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_are_refused_or_decode_to_a_consistent_sketch(data: bytes) -> None:
    try:
        sketch = Sketch.from_bytes(data)
    except ValueError:
        return
    assert Sketch.from_bytes(sketch.to_bytes()) == sketch
    if sketch.count:
        assert sketch.min is not None
        assert sketch.max is not None
        assert 0 <= sketch.min <= sketch.max


@settings(max_examples=300)
@given(
    st.lists(
        st.one_of(
            st.floats(min_value=0, max_value=MAX_VALUE_MS),
            st.sampled_from([0.0, 5e-324, 1.0, 1.0201, MAX_VALUE_MS]),
        ),
        max_size=300,
    ),
    st.integers(min_value=1, max_value=40),
)
def test_round_trip_is_exact_for_any_values(values: list[float], repeat: int) -> None:
    sketch = Sketch.from_values(np.repeat(values, repeat))
    decoded = Sketch.from_bytes(sketch.to_bytes())
    assert decoded == sketch
    assert decoded.to_bytes() == sketch.to_bytes()
    assert decoded.count == len(values) * repeat
