"""Serializers of the native span API.

They only describe the format for the schema: the body is decoded by msgspec.
"""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers


@extend_schema_field(
    {
        "oneOf": [
            {"type": "string", "format": "date-time"},
            {"type": "integer", "format": "int64", "minimum": 1},
        ],
        "description": "RFC 3339 with an offset or Z, up to nine fraction digits; "
        "or nanoseconds since the unix epoch.",
    }
)
class SpanTimeField(serializers.Field):
    pass


class NativeEventSerializer(serializers.Serializer):
    name = serializers.CharField()
    time = SpanTimeField()
    attributes = serializers.DictField(child=serializers.JSONField(), required=False)

    class Meta:
        ref_name = "NativeSpanEvent"


class NativeSpanSerializer(serializers.Serializer):
    trace_id = serializers.RegexField(r"^[0-9a-fA-F]{32}$", help_text="32 hex digits.")
    span_id = serializers.RegexField(r"^[0-9a-fA-F]{16}$", help_text="16 hex digits.")
    parent_id = serializers.RegexField(
        r"^[0-9a-fA-F]{16}$",
        required=False,
        allow_null=True,
        help_text="16 hex digits; null, absent or all zero for a root span.",
    )
    name = serializers.CharField()
    service = serializers.CharField(
        required=False,
        help_text="Defaults to the batch resource's service.name, then unknown_service.",
    )
    # Plain strings, not enums: any letter case is accepted.
    kind = serializers.CharField(
        required=False,
        help_text="internal (default), server, client, producer, consumer or unspecified.",
    )
    start = SpanTimeField()
    end = SpanTimeField()
    attributes = serializers.DictField(
        child=serializers.JSONField(),
        required=False,
        help_text="Strings, numbers, booleans or lists; nested objects become dotted keys.",
    )
    events = NativeEventSerializer(many=True, required=False)
    status = serializers.CharField(required=False, help_text="unset (default), ok or error.")
    status_message = serializers.CharField(required=False)

    class Meta:
        ref_name = "NativeSpan"


class NativeBatchSerializer(serializers.Serializer):
    resource = serializers.DictField(
        child=serializers.JSONField(),
        required=False,
        help_text="Attributes shared by every span of the batch, e.g. service.name.",
    )
    spans = NativeSpanSerializer(many=True)

    class Meta:
        ref_name = "NativeSpanBatch"
