"""The body layer undoes Content-Encoding within its cap, or raises one of its own errors."""

import gzip
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apps.ingest.decoding import BadEncoding, BodyTooLarge, UnsupportedMediaType, decode_body
from apps.ingest.decoding.body import MAX_GZIP_MEMBERS
from tests.fuzz.conftest import FUZZ
from tests.fuzz.properties import roughly_linear_check

pytestmark = pytest.mark.fuzz

DECLARED = (BadEncoding, BodyTooLarge, UnsupportedMediaType)
CODINGS = [
    None,
    "",
    "identity",
    "gzip",
    "x-gzip",
    "GZIP",
    " gzip ",
    "deflate",
    "gzip, deflate",
    "deflate,gzip",
    "gzip, gzip, gzip",
    ",, ,",
    "br",
    "zstd",
    "gzip;q=1",
    "compress",
]


def _compressed(data: bytes, form: str, level: int) -> bytes:
    if form == "gzip":
        return gzip.compress(data, compresslevel=level)
    if form == "zlib":
        return zlib.compress(data, level)
    raw = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
    return raw.compress(data) + raw.flush()


def _coding(form: str) -> str:
    return "gzip" if form == "gzip" else "deflate"


def _decoded_or_refused(body: bytes, coding: str | None, max_size: int) -> bytes | None:
    try:
        out = decode_body(body, coding, max_size=max_size)
    except DECLARED:
        return None
    assert len(out) <= max_size
    return out


forms = st.sampled_from(["gzip", "zlib", "raw"])
levels = st.integers(0, 9)


@FUZZ
@given(body=st.binary(max_size=3000), coding=st.sampled_from(CODINGS), cap=st.integers(1, 4000))
def test_any_bytes_under_any_coding_come_back_capped_or_are_refused(
    body: bytes, coding: str | None, cap: int
) -> None:
    _decoded_or_refused(body, coding, cap)


@FUZZ
@given(data=st.binary(max_size=5000), form=forms, level=levels, cap=st.integers(1, 6000))
def test_compressed_data_comes_back_whole_or_is_too_large(
    data: bytes, form: str, level: int, cap: int
) -> None:
    body = _compressed(data, form, level)
    if len(body) > cap or len(data) > cap:
        with pytest.raises(BodyTooLarge):
            decode_body(body, _coding(form), max_size=cap)
    else:
        assert decode_body(body, _coding(form), max_size=cap) == data


@FUZZ
@given(data=st.binary(min_size=1, max_size=2000), form=forms, level=levels, cut=st.data())
def test_a_truncated_stream_is_refused(
    data: bytes, form: str, level: int, cut: st.DataObject
) -> None:
    body = _compressed(data, form, level)
    prefix = body[: cut.draw(st.integers(0, len(body) - 1))]

    if form == "raw" and not prefix:
        # No bytes at all is no stream: an empty body, as "deflate" of nothing.
        assert _decoded_or_refused(prefix, "deflate", 10_000) in (None, b"")
    else:
        assert _decoded_or_refused(prefix, _coding(form), 10_000) is None


@FUZZ
@given(
    data=st.binary(max_size=2000),
    form=forms,
    level=levels,
    edits=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 7)), min_size=1, max_size=4),
    tail=st.binary(max_size=16),
)
def test_a_corrupted_stream_comes_back_capped_or_is_refused(
    data: bytes, form: str, level: int, edits: list[tuple[int, int]], tail: bytes
) -> None:
    body = bytearray(_compressed(data, form, level))
    for at, bit in edits:
        body[at % len(body)] ^= 1 << bit
    _decoded_or_refused(bytes(body) + tail, _coding(form), 3000)


@FUZZ
@given(members=st.lists(st.binary(max_size=200), min_size=1, max_size=2 * MAX_GZIP_MEMBERS))
def test_gzip_members_are_joined_up_to_the_limit(members: list[bytes]) -> None:
    body = b"".join(gzip.compress(member) for member in members)

    out = _decoded_or_refused(body, "gzip", 10_000)

    if len(members) <= MAX_GZIP_MEMBERS:
        assert out == b"".join(members)
    else:
        assert out is None


@FUZZ
@given(data=st.binary(max_size=1000), outer=forms, inner=forms)
def test_two_stacked_codings_are_undone_in_reverse_order(
    data: bytes, outer: str, inner: str
) -> None:
    body = _compressed(_compressed(data, inner, 6), outer, 6)

    assert decode_body(body, f"{_coding(inner)}, {_coding(outer)}", max_size=10_000) == data


def _bomb(expanded_mb: int, form: str = "gzip") -> bytes:
    wbits = {"gzip": zlib.MAX_WBITS | 16, "zlib": zlib.MAX_WBITS, "raw": -zlib.MAX_WBITS}[form]
    compressor = zlib.compressobj(9, zlib.DEFLATED, wbits)
    megabyte = bytes(1 << 20)
    parts = [compressor.compress(megabyte) for _ in range(expanded_mb)]
    return b"".join([*parts, compressor.flush()])


@pytest.mark.parametrize("form", ["gzip", "zlib", "raw"])
def test_a_decompression_bomb_costs_what_the_cap_allows_not_what_it_expands_to(form: str) -> None:
    cap = 1 << 20
    small, large = _bomb(16, form), _bomb(128, form)

    def refused(body: bytes) -> None:
        with pytest.raises(BodyTooLarge):
            decode_body(body, _coding(form), max_size=cap)

    # Eight times the expansion, about the same time: output stops at the cap.
    roughly_linear_check(refused, small, large, factor=1)


def test_a_bomb_inside_another_coding_is_stopped_at_the_cap() -> None:
    body = gzip.compress(_bomb(64))

    with pytest.raises(BodyTooLarge):
        decode_body(body, "gzip, gzip", max_size=1 << 20)
