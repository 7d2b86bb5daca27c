"""Stored span columns back to the span shape trace analysis works on."""

from typing import Any

from apps.analysis.spans import Span
from apps.ingest.decoding.records import KINDS
from apps.ingest.models import StatusCode

_KIND_COUNT = len(KINDS)
_ERROR = int(StatusCode.ERROR)


def analysis_span(
    span_id: bytes,
    parent_id: bytes | None,
    name: str,
    service: str,
    kind: int,
    start_ns: int,
    end_ns: int,
    attributes: dict[str, Any] | None,
    events: list[dict[str, Any]] | None,
    status: int,
) -> Span:
    # Positional and without copies (bytes and memoryview both have hex()): finalizing
    # builds one of these per stored span.
    return Span(
        span_id.hex(),
        parent_id.hex() if parent_id is not None else None,
        name,
        service,
        KINDS[kind] if 0 <= kind < _KIND_COUNT else "unspecified",
        start_ns,
        end_ns,
        attributes or {},
        tuple([(e["name"], e["time_ns"]) for e in events]) if events else (),
        status == _ERROR,
    )
