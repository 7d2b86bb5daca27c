"""A wire-compatible copy of the OTLP trace schema with attribute lists kept raw.

Reading every ``KeyValue`` through upb creates two Python wrapper objects per
attribute, which costs more than the whole parse. Here the official descriptors
are copied into a private pool with the ``attributes`` fields of Resource, Span
and Span.Event retyped from ``repeated KeyValue`` to ``repeated bytes``: both are
length-delimited on the wire, so the same body parses, and each attribute arrives
as its serialized ``KeyValue`` for ``otlp_attributes`` to read.
"""

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.resource.v1 import resource_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

_RAW_ATTRIBUTES = {
    "opentelemetry/proto/resource/v1/resource.proto": ("Resource",),
    "opentelemetry/proto/trace/v1/trace.proto": ("Span", "Span.Event"),
}


def _message(file: descriptor_pb2.FileDescriptorProto, path: str) -> descriptor_pb2.DescriptorProto:
    outer, *nested = path.split(".")
    message = next(m for m in file.message_type if m.name == outer)
    for name in nested:
        message = next(m for m in message.nested_type if m.name == name)
    return message


def _build_pool() -> descriptor_pool.DescriptorPool:
    pool = descriptor_pool.DescriptorPool()
    for module in (common_pb2, resource_pb2, trace_pb2, trace_service_pb2):
        file = descriptor_pb2.FileDescriptorProto()
        module.DESCRIPTOR.CopyToProto(file)
        for path in _RAW_ATTRIBUTES.get(file.name, ()):
            field = next(f for f in _message(file, path).field if f.name == "attributes")
            if not field.type_name.endswith(".KeyValue"):
                raise RuntimeError(f"unexpected OTLP schema: {path}.attributes")
            field.type = field.TYPE_BYTES
            field.ClearField("type_name")
        pool.Add(file)
    return pool


_POOL = _build_pool()

RawExportTraceServiceRequest: Any = message_factory.GetMessageClass(
    _POOL.FindMessageTypeByName("opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest")
)
