"""Request bodies to bytes, undoing Content-Encoding within a size cap.

Decompression is streamed with ``max_length``, so output stops one byte past the
cap and memory stays proportional to the cap: a small gzip bomb cannot make us
allocate its payload.
"""

import zlib

from apps.ingest.decoding.errors import BadEncoding, BodyTooLarge

_GZIP = zlib.MAX_WBITS | 16
_ZLIB = zlib.MAX_WBITS
_RAW_DEFLATE = -zlib.MAX_WBITS


def decode_body(body: bytes, content_encoding: str | None, *, max_size: int) -> bytes:
    """The body with every listed Content-Encoding undone, in reverse order."""
    if len(body) > max_size:
        raise BodyTooLarge(max_size)
    codings = [c.strip().lower() for c in (content_encoding or "").split(",") if c.strip()]
    for coding in reversed(codings):
        if coding in ("gzip", "x-gzip"):
            body = _inflate(body, _GZIP, max_size, multi_member=True)
        elif coding == "deflate":
            body = _deflate(body, max_size)
        elif coding != "identity":
            raise BadEncoding(f"unsupported Content-Encoding {coding!r}; use gzip or deflate")
    return body


def _deflate(body: bytes, max_size: int) -> bytes:
    # HTTP's "deflate" is zlib-wrapped, but some clients send a raw deflate stream;
    # a zlib header is recognisable by its method nibble and checksum.
    wrapped = len(body) >= 2 and body[0] & 0x0F == 8 and (body[0] << 8 | body[1]) % 31 == 0
    return _inflate(body, _ZLIB if wrapped else _RAW_DEFLATE, max_size, multi_member=False)


def _inflate(data: bytes, wbits: int, max_size: int, *, multi_member: bool) -> bytes:
    name = "gzip" if wbits == _GZIP else "deflate"
    out: list[bytes] = []
    size = 0
    while True:
        inflater = zlib.decompressobj(wbits)
        pending = data
        try:
            while True:
                chunk = inflater.decompress(pending, max_size - size + 1)
                size += len(chunk)
                if size > max_size:
                    raise BodyTooLarge(max_size)
                out.append(chunk)
                pending = inflater.unconsumed_tail
                if inflater.eof or (not pending and not chunk):
                    break
        except zlib.error as exc:
            raise BadEncoding(f"corrupt {name} body: {exc}") from None
        if not inflater.eof:
            raise BadEncoding(f"truncated {name} body")
        # A gzip body may hold several members back to back (RFC 1952).
        data = inflater.unused_data
        if not data:
            return b"".join(out)
        if not multi_member:
            raise BadEncoding(f"trailing data after the {name} stream")
