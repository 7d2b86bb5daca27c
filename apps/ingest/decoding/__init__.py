"""Trace ingestion decoding: request bodies (OTLP/HTTP protobuf or JSON, or our
native JSON) to normalized span records. Pure functions, no database access."""

from apps.ingest.decoding.body import decode_body
from apps.ingest.decoding.dispatch import decode_native, decode_otlp, otlp_encoding
from apps.ingest.decoding.errors import (
    BadEncoding,
    BodyTooLarge,
    DecodeError,
    IngestError,
    UnsupportedMediaType,
)
from apps.ingest.decoding.native_json import decode_native_json
from apps.ingest.decoding.otlp_json import decode_otlp_json
from apps.ingest.decoding.otlp_protobuf import decode_otlp_protobuf
from apps.ingest.decoding.records import DecodeResult, Reason, SpanEvent, SpanRecord
from apps.ingest.decoding.responses import (
    RpcCode,
    export_response_json,
    export_response_protobuf,
    status_json,
    status_protobuf,
)

__all__ = [
    "BadEncoding",
    "BodyTooLarge",
    "DecodeError",
    "DecodeResult",
    "IngestError",
    "Reason",
    "RpcCode",
    "SpanEvent",
    "SpanRecord",
    "UnsupportedMediaType",
    "decode_body",
    "decode_native",
    "decode_native_json",
    "decode_otlp",
    "decode_otlp_json",
    "decode_otlp_protobuf",
    "export_response_json",
    "export_response_protobuf",
    "otlp_encoding",
    "status_json",
    "status_protobuf",
]
