"""OTLP/HTTP response bodies, in the encoding the request used.

``google.rpc.Status`` ships with googleapis-common-protos, which we do not depend
on; its two scalar fields are written by hand (field 1 int32 code, field 2 string
message, field 3 details is never sent).
"""

import json
from enum import IntEnum

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from apps.core.varint import varint


class RpcCode(IntEnum):
    """The google.rpc.Code values an ingestion endpoint answers with."""

    OK = 0
    INVALID_ARGUMENT = 3
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    UNAUTHENTICATED = 16


def export_response_protobuf(*, rejected_spans: int = 0, error_message: str = "") -> bytes:
    """Full success leaves partial_success unset, as OTLP requires.

    A message with no rejected span is OTLP's warning: dropped attributes are reported so.
    """
    response = ExportTraceServiceResponse()
    if rejected_spans or error_message:
        response.partial_success.rejected_spans = rejected_spans
        response.partial_success.error_message = error_message
    return response.SerializeToString()


def export_response_json(*, rejected_spans: int = 0, error_message: str = "") -> bytes:
    if not (rejected_spans or error_message):
        return b"{}"
    partial: dict[str, str] = {}
    if rejected_spans:
        # int64 is a decimal string in the proto3 JSON mapping.
        partial["rejectedSpans"] = str(rejected_spans)
    if error_message:
        partial["errorMessage"] = error_message
    return json.dumps({"partialSuccess": partial}).encode()


def status_protobuf(code: int, message: str) -> bytes:
    out = bytearray()
    if code:
        out.append(0x08)
        out += varint(code & 0xFFFF_FFFF_FFFF_FFFF if code < 0 else code)
    if message:
        encoded = message.encode()
        out.append(0x12)
        out += varint(len(encoded))
        out += encoded
    return bytes(out)


def status_json(code: int, message: str) -> bytes:
    return json.dumps({"code": int(code), "message": message}).encode()
