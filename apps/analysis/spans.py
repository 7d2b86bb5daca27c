"""The span shape trace analysis works on, independent of how spans are stored."""

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from apps.analysis.degradations import SpanDecision


# Not frozen: a frozen dataclass costs five times as much to build, and trace analysis
# builds several per span; instances are never changed after construction.
@dataclass(slots=True)
class Span:
    """One span of a trace; times are integer nanoseconds since the epoch.

    ``kind`` is the OpenTelemetry span kind in any spelling ("client",
    "SPAN_KIND_CLIENT"); ``events`` are ``(name, time_ns)`` pairs; ``decisions`` the
    run-time client's decision events, read only where the ledger is written.
    """

    span_id: str
    parent_id: str | None
    name: str
    service: str
    kind: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any] = field(default_factory=dict)
    events: tuple[tuple[str, int], ...] = ()
    status_error: bool = False
    decisions: "tuple[SpanDecision, ...]" = ()

    @property
    def stop_ns(self) -> int:
        """The end with clock skew removed: a span that ends before it starts lasts zero."""
        return max(self.start_ns, self.end_ns)

    @property
    def duration_ns(self) -> int:
        return self.stop_ns - self.start_ns


def _keep_key(span: Span) -> tuple[int, int, bool, str, str, str]:
    return (span.stop_ns, -span.start_ns, span.status_error, span.name, span.service, span.kind)


def unique_spans(spans: Iterable[Span]) -> dict[str, Span]:
    """Spans by id, one per id whatever the input order.

    A span delivered twice (a retried export) keeps the copy that ends last,
    then starts first; copies equal in those and in name, service, kind and
    error are taken to be the same span.
    """
    by_id: dict[str, Span] = {}
    for span in spans:
        kept = by_id.get(span.span_id)
        if kept is None or _keep_key(span) > _keep_key(kept):
            by_id[span.span_id] = span
    return by_id
