"""Request bodies to bytes, undoing Content-Encoding within a size cap.

Decompression is streamed with ``max_length``, so output stops one byte past the
cap and memory stays proportional to the cap: a small gzip bomb cannot make us
allocate its payload. Input is fed in slices, so the cost stays linear in the
body however many gzip members it holds.
"""

import zlib

from apps.ingest.decoding.errors import BadEncoding, BodyTooLarge, UnsupportedMediaType

_GZIP = zlib.MAX_WBITS | 16
_ZLIB = zlib.MAX_WBITS
_RAW_DEFLATE = -zlib.MAX_WBITS

# Exporters send one coding, proxies may add a second; every extra layer is another pass.
MAX_CONTENT_CODINGS = 2
# Writers emit a member per flush; thousands of empty members are only ever an attack.
MAX_GZIP_MEMBERS = 8
# zlib copies the input left over after a member into ``unused_data``: feeding slices
# keeps that copy small instead of the rest of the body.
_FEED_BYTES = 64 * 1024


def decode_body(body: bytes, content_encoding: str | None, *, max_size: int) -> bytes:
    """The body with every listed Content-Encoding undone, in reverse order."""
    if len(body) > max_size:
        raise BodyTooLarge(max_size)
    codings = [c.strip().lower() for c in (content_encoding or "").split(",") if c.strip()]
    if len(codings) > MAX_CONTENT_CODINGS:
        raise UnsupportedMediaType(
            f"{len(codings)} stacked Content-Encodings; at most {MAX_CONTENT_CODINGS} are undone"
        )
    for coding in reversed(codings):
        if coding in ("gzip", "x-gzip"):
            body = _inflate(body, _GZIP, max_size, members=MAX_GZIP_MEMBERS)
        elif coding == "deflate":
            body = _deflate(body, max_size)
        elif coding != "identity":
            raise BadEncoding(f"unsupported Content-Encoding {coding!r}; use gzip or deflate")
    return body


def _deflate(body: bytes, max_size: int) -> bytes:
    # HTTP's "deflate" is zlib-wrapped, but some clients send a raw deflate stream;
    # a zlib header is recognisable by its method nibble and checksum.
    wrapped = len(body) >= 2 and body[0] & 0x0F == 8 and (body[0] << 8 | body[1]) % 31 == 0
    return _inflate(body, _ZLIB if wrapped else _RAW_DEFLATE, max_size, members=1)


def _inflate(data: bytes, wbits: int, max_size: int, *, members: int) -> bytes:
    """Up to ``members`` streams back to back (RFC 1952 allows several gzip members)."""
    name = "gzip" if wbits == _GZIP else "deflate"
    view = memoryview(data)
    out: list[bytes] = []
    size = 0
    offset = 0
    for _ in range(members):
        inflater = zlib.decompressobj(wbits)
        try:
            while not inflater.eof and offset < len(view):
                pending: bytes | memoryview = view[offset : offset + _FEED_BYTES]
                offset += len(pending)
                while pending and not inflater.eof:
                    chunk = inflater.decompress(pending, max_size - size + 1)
                    size += len(chunk)
                    if size > max_size:
                        raise BodyTooLarge(max_size)
                    out.append(chunk)
                    pending = inflater.unconsumed_tail
        except zlib.error as exc:
            raise BadEncoding(f"corrupt {name} body: {exc}") from None
        if not inflater.eof:
            raise BadEncoding(f"truncated {name} body")
        offset -= len(inflater.unused_data)
        if offset == len(view):
            return b"".join(out)
    if members == 1:
        raise BadEncoding(f"trailing data after the {name} stream")
    raise BadEncoding(f"a {name} body may hold at most {members} members")
