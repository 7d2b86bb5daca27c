"""Stored span columns back to the span shape trace analysis works on."""

from typing import Any

from apps.ingest.decoding.records import KINDS
from apps.ingest.models import StatusCode
from apps.rollups.spans import Span


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
    return Span(
        span_id=bytes(span_id).hex(),
        parent_id=bytes(parent_id).hex() if parent_id is not None else None,
        name=name,
        service=service,
        kind=KINDS[kind] if 0 <= kind < len(KINDS) else "unspecified",
        start_ns=start_ns,
        end_ns=end_ns,
        attributes=attributes or {},
        events=tuple((e["name"], e["time_ns"]) for e in events or ()),
        status_error=status == StatusCode.ERROR,
    )
