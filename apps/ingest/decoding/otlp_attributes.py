"""OTLP attribute lists to flat dicts, from serialized ``KeyValue`` messages.

Most attributes are a short key with a string, int, bool or double value laid out
canonically; those are read straight from the bytes and remembered for the rest of
the request (batches repeat the same pairs a lot). Anything else (arrays, kvlists,
bytes, empty values, unusual layouts) goes through the generated ``KeyValue`` class.
"""

import struct
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from apps.ingest.decoding.records import Attributes, finite_or_text

Cache = dict[bytes, tuple[str, Any]]

_unpack_double = struct.Struct("<d").unpack_from
_STRING, _BOOL, _INT, _DOUBLE = 0x0A, 0x10, 0x18, 0x21


def read_attributes(raw_key_values: Iterable[bytes], cache: Cache) -> Attributes:
    """Raises protobuf's DecodeError or UnicodeDecodeError on a malformed pair."""
    out: Attributes = {}
    for raw in raw_key_values:
        pair = cache.get(raw)
        if pair is None:
            pair = _scalar_pair(raw)
            if pair is None:
                flatten_key_values((KeyValue.FromString(raw),), "", out)
                continue
            cache[raw] = pair
        out[pair[0]] = pair[1]
    return out


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise IndexError("varint too long")


def _scalar_pair(raw: bytes) -> tuple[str, Any] | None:
    """(key, value) for a canonical KeyValue holding a scalar, else None."""
    try:
        if raw[0] != _STRING:
            return None
        key_end, start = raw[1], 2
        if key_end >= 0x80:
            key_end, start = _varint(raw, 1)
        key_end += start
        if raw[key_end] != 0x12:
            return None
        length, pos = raw[key_end + 1], key_end + 2
        if length >= 0x80:
            length, pos = _varint(raw, key_end + 1)
        end = len(raw)
        if pos + length != end:
            return None
        tag = raw[pos]
        if tag == _STRING:
            length, pos = _varint(raw, pos + 1)
            if pos + length != end:
                return None
            value: Any = raw[pos:].decode()
        elif tag == _INT:
            value, pos = _varint(raw, pos + 1)
            if pos != end:
                return None
            if value >= 1 << 63:
                value -= 1 << 64
        elif tag == _BOOL:
            if pos + 2 != end or raw[pos + 1] > 1:
                return None
            value = raw[pos + 1] == 1
        elif tag == _DOUBLE:
            if pos + 9 != end:
                return None
            value = finite_or_text(_unpack_double(raw, pos + 1)[0])
        else:
            return None
        return raw[start:key_end].decode(), value
    except (IndexError, UnicodeDecodeError):
        return None


def flatten_key_values(key_values: Iterable[KeyValue], prefix: str, out: Attributes) -> None:
    """kvlist values become dotted keys; unset values are dropped.

    A kvlist under a key already over the key length limit stays whole under that key:
    every dotted key below it would be a copy of the long prefix, so a small body could
    make gigabytes of keys, all to be dropped by the span's budget anyway.
    """
    for key_value in key_values:
        value = key_value.value
        which = value.WhichOneof("value")
        if which == "kvlist_value" and (
            len(prefix) + len(key_value.key) <= settings.INGEST_MAX_ATTRIBUTE_KEY_LENGTH
        ):
            flatten_key_values(value.kvlist_value.values, f"{prefix}{key_value.key}.", out)
        elif which is not None:
            out[prefix + key_value.key] = any_value(value)


def any_value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which == "string_value":
        return value.string_value
    if which == "int_value":
        return value.int_value
    if which == "bool_value":
        return value.bool_value
    if which == "double_value":
        return finite_or_text(value.double_value)
    if which == "array_value":
        return [any_value(item) for item in value.array_value.values]
    if which == "kvlist_value":
        # Only reached inside arrays, where a dotted key has nothing to hang on.
        return {item.key: any_value(item.value) for item in value.kvlist_value.values}
    if which == "bytes_value":
        return value.bytes_value.hex()
    return None
