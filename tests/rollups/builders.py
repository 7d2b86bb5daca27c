"""Small builders for hand-made traces."""

from typing import Any

from apps.rollups.critical_path import CriticalPath
from apps.rollups.spans import Span

MS = 1_000_000


def span(
    span_id: str,
    parent_id: str | None,
    start_ns: int,
    end_ns: int,
    *,
    name: str | None = None,
    service: str = "api",
    kind: str = "internal",
    attributes: dict[str, Any] | None = None,
    events: tuple[tuple[str, int], ...] = (),
    error: bool = False,
) -> Span:
    return Span(
        span_id=span_id,
        parent_id=parent_id,
        name=name if name is not None else span_id,
        service=service,
        kind=kind,
        start_ns=start_ns,
        end_ns=end_ns,
        attributes=attributes or {},
        events=events,
        status_error=error,
    )


def as_tuples(path: CriticalPath) -> list[tuple[str, int, int]]:
    return [(s.span_id, s.start_ns, s.end_ns) for s in path.segments]
