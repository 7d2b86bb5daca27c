import gzip
import random
import time
import tracemalloc
import zlib

import pytest

from apps.ingest.decoding import (
    BadEncoding,
    BodyTooLarge,
    DecodeError,
    UnsupportedMediaType,
    decode_body,
)
from apps.ingest.decoding.body import MAX_CONTENT_CODINGS, MAX_GZIP_MEMBERS

PAYLOAD = b"spans " * 1000
MIB = 1024 * 1024


def _deflate(data: bytes, wbits: int) -> bytes:
    compressor = zlib.compressobj(6, zlib.DEFLATED, wbits)
    return compressor.compress(data) + compressor.flush()


@pytest.mark.parametrize("encoding", [None, "", "identity", " Identity "])
def test_an_uncompressed_body_is_returned_as_is(encoding: str | None) -> None:
    assert decode_body(PAYLOAD, encoding, max_size=MIB) == PAYLOAD


@pytest.mark.parametrize("encoding", ["gzip", "GZIP", "x-gzip"])
def test_gzip_is_decompressed(encoding: str) -> None:
    assert decode_body(gzip.compress(PAYLOAD), encoding, max_size=MIB) == PAYLOAD


def test_deflate_is_decompressed_zlib_wrapped_or_raw() -> None:
    wrapped = _deflate(PAYLOAD, zlib.MAX_WBITS)
    raw = _deflate(PAYLOAD, -zlib.MAX_WBITS)

    assert decode_body(wrapped, "deflate", max_size=MIB) == PAYLOAD
    assert decode_body(raw, "deflate", max_size=MIB) == PAYLOAD


def test_concatenated_gzip_members_are_all_read() -> None:
    body = gzip.compress(b"first ") + gzip.compress(b"second")

    assert decode_body(body, "gzip", max_size=MIB) == b"first second"


def test_stacked_encodings_are_undone_last_first() -> None:
    body = gzip.compress(_deflate(PAYLOAD, zlib.MAX_WBITS))

    assert decode_body(body, "deflate, gzip", max_size=MIB) == PAYLOAD


def test_a_body_that_decompresses_to_exactly_the_cap_is_accepted() -> None:
    body = gzip.compress(bytes(1000))

    assert decode_body(body, "gzip", max_size=1000) == bytes(1000)
    with pytest.raises(BodyTooLarge):
        decode_body(body, "gzip", max_size=999)


def test_an_uncompressed_body_over_the_cap_is_too_large() -> None:
    with pytest.raises(BodyTooLarge, match="exceeds 10 bytes"):
        decode_body(bytes(11), None, max_size=10)


@pytest.mark.parametrize(
    ("body", "encoding", "message"),
    [
        pytest.param(gzip.compress(PAYLOAD)[:-12], "gzip", "truncated gzip", id="truncated gzip"),
        pytest.param(gzip.compress(PAYLOAD)[:5], "gzip", "truncated gzip", id="header only"),
        pytest.param(b"", "gzip", "truncated gzip", id="empty gzip"),
        pytest.param(PAYLOAD, "gzip", "corrupt gzip", id="not gzip at all"),
        pytest.param(gzip.compress(PAYLOAD) + b"junk", "gzip", "corrupt gzip", id="gzip + junk"),
        pytest.param(b"\xff" * 40, "deflate", "corrupt deflate", id="not deflate"),
        pytest.param(
            _deflate(PAYLOAD, zlib.MAX_WBITS) + b"junk", "deflate", "trailing", id="deflate + junk"
        ),
        pytest.param(PAYLOAD, "br", "unsupported Content-Encoding 'br'", id="brotli"),
    ],
)
def test_bad_encodings_are_refused(body: bytes, encoding: str, message: str) -> None:
    with pytest.raises(BadEncoding, match=message) as caught:
        decode_body(body, encoding, max_size=MIB)

    assert isinstance(caught.value, DecodeError)


@pytest.fixture(scope="module")
def gzip_bomb() -> bytes:
    """1 GiB of zeros as gzip (about 4.5 MiB), compressed chunk by chunk."""
    compressor = zlib.compressobj(1, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    chunk = bytes(MIB)
    parts = [compressor.compress(chunk) for _ in range(1024)]
    parts.append(compressor.flush())
    return b"".join(parts)


def test_a_gzip_bomb_is_stopped_at_the_cap_quickly_and_in_bounded_memory(
    gzip_bomb: bytes,
) -> None:
    cap = 8 * MIB
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(BodyTooLarge):
            decode_body(gzip_bomb, "gzip", max_size=cap)
        elapsed = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert elapsed < 2
    assert peak < 3 * cap


# --- Limits against bodies built to burn CPU --------------------------------------------


def test_eight_mib_of_empty_gzip_members_is_refused_in_well_under_a_second() -> None:
    body = gzip.compress(b"") * (8 * MIB // len(gzip.compress(b"")))
    started = time.process_time()

    with pytest.raises(BadEncoding, match=f"at most {MAX_GZIP_MEMBERS} members"):
        decode_body(body, "gzip", max_size=32 * MIB)

    assert time.process_time() - started < 1.0


@pytest.mark.parametrize("members", [2, 3, MAX_GZIP_MEMBERS])
def test_a_few_gzip_members_decode_exactly(members: int) -> None:
    parts = [f"member {i} ".encode() * (i + 1) for i in range(members)]
    body = b"".join(gzip.compress(part) for part in parts)

    assert decode_body(body, "gzip", max_size=MIB) == b"".join(parts)


def test_one_gzip_member_past_the_limit_is_refused() -> None:
    body = gzip.compress(b"x") * (MAX_GZIP_MEMBERS + 1)

    with pytest.raises(BadEncoding, match=f"at most {MAX_GZIP_MEMBERS} members"):
        decode_body(body, "gzip", max_size=MIB)


def test_members_larger_than_one_input_slice_decode_exactly() -> None:
    # Incompressible, so each member spans several of the slices input is fed in.
    first, second = random.Random(7).randbytes(300_000), random.Random(8).randbytes(200_000)
    body = gzip.compress(first) + gzip.compress(second)

    assert decode_body(body, "gzip", max_size=MIB) == first + second


def test_junk_after_a_large_member_is_corrupt() -> None:
    body = gzip.compress(random.Random(7).randbytes(300_000)) + b"junk"

    with pytest.raises(BadEncoding, match="corrupt gzip"):
        decode_body(body, "gzip", max_size=MIB)


def test_two_stacked_gzip_encodings_are_undone() -> None:
    body = gzip.compress(gzip.compress(PAYLOAD))

    assert decode_body(body, "gzip, gzip", max_size=MIB) == PAYLOAD


@pytest.mark.parametrize("encoding", ["gzip,gzip,gzip", "identity, identity, gzip", "br,br,br"])
def test_more_than_two_stacked_encodings_are_an_unsupported_media_type(encoding: str) -> None:
    body = gzip.compress(gzip.compress(gzip.compress(PAYLOAD)))

    with pytest.raises(UnsupportedMediaType, match=f"at most {MAX_CONTENT_CODINGS}"):
        decode_body(body, encoding, max_size=MIB)
