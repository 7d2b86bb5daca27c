"""msgspec structs for the OTLP trace JSON mapping; only the fields we read.

Every field is optional because proto3 JSON treats a missing field and ``null``
alike as the default value; unknown fields are ignored, as OTLP requires.
Decoded JSON cannot hold reference cycles, so the structs stay out of the cycle
collector (``gc=False``); a batch makes tens of thousands of them.
"""

from __future__ import annotations

import msgspec


class AnyValue(msgspec.Struct, rename="camel", gc=False):
    string_value: str | None = None
    bool_value: bool | None = None
    int_value: int | str | None = None
    double_value: float | str | None = None
    array_value: ArrayValue | None = None
    kvlist_value: KeyValueList | None = None
    bytes_value: str | None = None


class ArrayValue(msgspec.Struct, gc=False):
    values: list[AnyValue] | None = None


class KeyValue(msgspec.Struct, gc=False):
    key: str = ""
    value: AnyValue | None = None


class KeyValueList(msgspec.Struct, gc=False):
    values: list[KeyValue] | None = None


class Status(msgspec.Struct, gc=False):
    code: int | str | None = None
    message: str | None = None


class Event(msgspec.Struct, rename="camel", gc=False):
    time_unix_nano: int | str | None = None
    name: str | None = None
    attributes: list[KeyValue] | None = None


class Span(msgspec.Struct, rename="camel", gc=False):
    trace_id: str | None = None
    span_id: str | None = None
    parent_span_id: str | None = None
    name: str | None = None
    kind: int | str | None = None
    start_time_unix_nano: int | str | None = None
    end_time_unix_nano: int | str | None = None
    attributes: list[KeyValue] | None = None
    events: list[Event] | None = None
    status: Status | None = None


class Scope(msgspec.Struct, gc=False):
    name: str | None = None


class Resource(msgspec.Struct, gc=False):
    attributes: list[KeyValue] | None = None


class ScopeSpans(msgspec.Struct, rename="camel", gc=False):
    scope: Scope | None = None
    spans: list[Span] | None = None


class ResourceSpans(msgspec.Struct, rename="camel", gc=False):
    resource: Resource | None = None
    scope_spans: list[ScopeSpans] | None = None


class Request(msgspec.Struct, rename="camel", gc=False):
    resource_spans: list[ResourceSpans] | None = None
