"""Request-level entry points: pick the decoder from the headers, undo compression."""

from typing import Literal

from apps.ingest.decoding.body import decode_body
from apps.ingest.decoding.errors import UnsupportedMediaType
from apps.ingest.decoding.native_json import decode_native_json
from apps.ingest.decoding.otlp_json import decode_otlp_json
from apps.ingest.decoding.otlp_protobuf import decode_otlp_protobuf
from apps.ingest.decoding.records import DecodeResult

OtlpEncoding = Literal["protobuf", "json"]

_OTLP_MEDIA_TYPES: dict[str, OtlpEncoding] = {
    "application/x-protobuf": "protobuf",
    "application/protobuf": "protobuf",
    "application/json": "json",
}


def otlp_encoding(content_type: str | None) -> OtlpEncoding:
    """The OTLP body encoding named by a Content-Type header (parameters ignored)."""
    media_type = (content_type or "").split(";", 1)[0].strip().lower()
    try:
        return _OTLP_MEDIA_TYPES[media_type]
    except KeyError:
        raise UnsupportedMediaType(
            f"unsupported Content-Type {media_type or '(none)'!r}; "
            "use application/x-protobuf or application/json"
        ) from None


def decode_otlp(
    body: bytes, *, encoding: OtlpEncoding, content_encoding: str | None, max_size: int
) -> DecodeResult:
    raw = decode_body(body, content_encoding, max_size=max_size)
    if encoding == "protobuf":
        return decode_otlp_protobuf(raw)
    return decode_otlp_json(raw)


def decode_native(body: bytes, *, content_encoding: str | None, max_size: int) -> DecodeResult:
    return decode_native_json(decode_body(body, content_encoding, max_size=max_size))
