"""Decoding and merging stored sketches in batches: the same answers and errors as one by one."""

import math
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apps.rollups.sketches.codec import decode_many
from apps.rollups.sketches.ddsketch import MAX_VALUE_MS, Sketch
from apps.rollups.sketches.merge_batch import merged_from_bytes, merged_groups


def lognormal(count: int, seed: int, sigma: float = 0.6) -> np.ndarray:
    return np.random.default_rng(seed).lognormal(math.log(120), sigma, count)


# Every layout and count width, escapes of one byte and more, zeros and extremes.
SAMPLES = {
    "empty": np.array([]),
    "zeros only": np.zeros(5),
    "one value": np.array([87.25]),
    "scattered (gap layout)": np.array([0.001, 3.0, 4000.0, 9e6]),
    "minute (bitmap layout)": lognormal(100, 1),
    "wide minute": lognormal(300, 2, sigma=1.5),
    "hour": lognormal(20_000, 3),
    "huge counts": np.repeat([10.0, 20.0, 40.0], [3, 70_000, 300]),
    "extremes": np.array([0.0, 5e-324, 1e-300, MAX_VALUE_MS, 1.5]),
    "gaps with escapes": np.repeat([0.5, 70.0, 9000.0], [1, 40, 300]),
}
STORED = {name: Sketch.from_values(values).to_bytes() for name, values in SAMPLES.items()}


def one_by_one(blobs: list[bytes], groups: list[int], group_count: int) -> list[Sketch]:
    return [
        Sketch.merged(Sketch.from_bytes(b) for b, g in zip(blobs, groups, strict=True) if g == n)
        for n in range(group_count)
    ]


def assert_same(found: list[Sketch], expected: list[Sketch]) -> None:
    assert found == expected
    assert [s.to_bytes() for s in found] == [s.to_bytes() for s in expected]


def outcome(decode: Callable[[], Sketch]) -> tuple[str, object]:
    """("error", message) or ("sketch", its bytes): what a decoder made of some input."""
    try:
        return "sketch", decode().to_bytes()
    except ValueError as error:
        return "error", str(error)


def same_outcome(blobs: list[bytes]) -> bool:
    return outcome(lambda: merged_from_bytes(blobs)) == outcome(
        lambda: Sketch.merged(Sketch.from_bytes(blob) for blob in blobs)
    )


def test_every_sample_decodes_in_the_batch_path_to_the_same_parts() -> None:
    blobs = list(STORED.values())
    parts = decode_many(blobs)
    assert parts.rejected.tolist() == []
    for row, index in enumerate(parts.index.tolist()):
        sketch = Sketch.from_bytes(blobs[index])
        start, size = parts.offsets[row], parts.bucket_count[row]
        assert (
            dict(
                zip(
                    parts.keys[start : start + size].tolist(),
                    parts.counts[start : start + size].tolist(),
                    strict=True,
                )
            )
            == sketch.buckets()
        )
        assert parts.zero_count[row] == sketch.zero_count
        assert parts.sum_ns[row] == sketch.sum_ns


def test_groups_merge_like_sketch_merged() -> None:
    blobs = list(STORED.values()) * 3
    groups = [index % 4 for index in range(len(blobs))]
    assert_same(
        merged_groups(blobs=blobs, groups=groups, group_count=5), one_by_one(blobs, groups, 5)
    )


def test_memoryviews_as_the_database_returns_them_are_read_alike() -> None:
    blobs = list(STORED.values())
    views = [memoryview(blob) for blob in blobs]
    assert merged_from_bytes(views) == merged_from_bytes(blobs)


def test_no_sketches_give_empty_groups() -> None:
    assert merged_groups(blobs=[], groups=[], group_count=3) == [Sketch(), Sketch(), Sketch()]
    assert merged_groups(blobs=[], groups=[], group_count=0) == []
    assert merged_from_bytes([]) == Sketch()
    assert merged_from_bytes([Sketch().to_bytes()] * 4) == Sketch()


def test_a_sum_past_the_int64_range_goes_through_the_scalar_decoder() -> None:
    big = Sketch.from_values(np.full(2000, MAX_VALUE_MS)).to_bytes()
    small = STORED["minute (bitmap layout)"]
    assert decode_many([small, big, small]).rejected.tolist() == [1]
    assert_same(
        merged_groups(blobs=[small, big, small], groups=[0, 0, 1], group_count=2),
        one_by_one([small, big, small], [0, 0, 1], 2),
    )
    assert merged_from_bytes([big, big]).sum_ns == 2 * Sketch.from_bytes(big).sum_ns


def test_group_labels_are_checked() -> None:
    blob = STORED["one value"]
    with pytest.raises(ValueError, match="one group label per sketch"):
        merged_groups(blobs=[blob, blob], groups=[0], group_count=1)
    with pytest.raises(ValueError, match="range"):
        merged_groups(blobs=[blob], groups=[1], group_count=1)
    with pytest.raises(ValueError, match="range"):
        merged_groups(blobs=[blob], groups=[-1], group_count=1)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "too short"),
        (b"\x02\x00\x00\x00\x00", "version 2"),
        (b"\x01\x01\x00\x00\x00", "non-zero layout byte"),
        (b"\x01\x00\x00\x00\x00\x00", "trailing data"),
        (b"\x01\x00" + b"\xff" * 11, "too long"),
        (STORED["minute (bitmap layout)"][:-1], "sketch"),
    ],
)
def test_a_malformed_blob_among_good_ones_raises_the_scalar_decoders_error(
    data: bytes, message: str
) -> None:
    good = list(STORED.values())
    with pytest.raises(ValueError, match=message):
        merged_groups(blobs=[*good, data, *good], groups=[0] * (2 * len(good) + 1), group_count=1)


def test_the_first_malformed_blob_is_the_one_reported() -> None:
    good = STORED["hour"]
    blobs = [good, b"\x01\x00\x00\x00\x00\x00", good, b"\x02\x00\x00\x00\x00"]
    with pytest.raises(ValueError, match="trailing data"):
        merged_from_bytes(blobs)


def test_non_bytes_are_refused_like_the_scalar_decoder_does() -> None:
    with pytest.raises(ValueError, match="must be bytes"):
        merged_from_bytes([STORED["hour"], "\x01\x00\x00\x00\x00"])  # type: ignore[list-item]


@pytest.mark.parametrize("name", [name for name in STORED if name != "empty"])
def test_every_byte_flip_and_truncation_gives_the_scalar_outcome(name: str) -> None:
    data = STORED[name]
    variants = [data[:end] for end in range(len(data))] + [data + b"\x00", data + b"\x01"]
    for position in range(len(data)):
        for flip in (0x01, 0x02, 0x10, 0x7F, 0x80, 0xFF):
            corrupt = bytearray(data)
            corrupt[position] ^= flip
            variants.append(bytes(corrupt))
    for variant in variants:
        assert same_outcome([variant]), variant


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(sorted(STORED)),
    st.lists(st.tuples(st.integers(min_value=0), st.integers(0, 255)), min_size=1, max_size=4),
    st.sampled_from(["replace", "insert", "delete"]),
)
def test_random_edits_give_the_scalar_outcome(
    name: str, edits: list[tuple[int, int]], how: str
) -> None:
    data = bytearray(STORED[name])
    for position, byte in edits:
        at = position % (len(data) + 1)
        if how == "insert":
            data.insert(at, byte)
        elif how == "delete" and at < len(data):
            del data[at]
        elif at < len(data):
            data[at] = byte
    # Alone and among valid sketches: the batch must neither accept more nor differ.
    assert same_outcome([bytes(data)])
    assert same_outcome([STORED["hour"], bytes(data), STORED["scattered (gap layout)"]])


@settings(max_examples=500)
@given(st.binary(max_size=120))
def test_arbitrary_bytes_give_the_scalar_outcome(data: bytes) -> None:
    assert same_outcome([data])


values = st.one_of(
    st.floats(min_value=0, max_value=MAX_VALUE_MS),
    st.sampled_from([0.0, 5e-324, 1.0, 1.0201, 250.0, MAX_VALUE_MS]),
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(values, max_size=60),
            st.integers(min_value=1, max_value=300),
            st.integers(min_value=0, max_value=4),
        ),
        max_size=25,
    )
)
def test_merged_groups_equal_merging_one_by_one_for_any_values(
    sketches: list[tuple[list[float], int, int]],
) -> None:
    blobs = [Sketch.from_values(np.repeat(v, repeat)).to_bytes() for v, repeat, _ in sketches]
    groups = [group for _, _, group in sketches]
    assert_same(
        merged_groups(blobs=blobs, groups=groups, group_count=5), one_by_one(blobs, groups, 5)
    )


@settings(max_examples=50, deadline=None)
@given(st.integers(min_value=0, max_value=2**32 - 1), st.integers(min_value=1, max_value=400))
def test_many_lognormal_buckets_merge_alike(seed: int, count: int) -> None:
    rng = np.random.default_rng(seed)
    blobs = [
        Sketch.from_values(rng.lognormal(rng.uniform(0, 8), rng.uniform(0.05, 2), n)).to_bytes()
        for n in rng.integers(0, 500, count)
    ]
    groups = rng.integers(0, 42, count).tolist()
    assert decode_many(blobs).rejected.tolist() == []
    assert_same(
        merged_groups(blobs=blobs, groups=groups, group_count=42), one_by_one(blobs, groups, 42)
    )
