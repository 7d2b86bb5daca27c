"""A trace's limits at the door: spans a trace has no room for are rejected, with why.

The drain enforces ``INGEST_MAX_SPANS_PER_TRACE`` and ``INGEST_MAX_TRACE_BYTES``
(``span_writer``): it sees every stored span. The request path tells the client: the
spans a trace has no room for, as far as the drain left word (``trace_fill``, in the
shared cache), and those its own request would carry past a limit, are rejected in
``partial_success`` like any span over its budget, kept out of the batch, and counted
on the trace when it is stored already. Spans are taken in the drain's order (the root
first, then by start) and measured as their rows will be stored. What the door misses
(requests racing for one trace, a trace filled past a limit from below half of it by
one request) the drain cuts and counts.
"""

from dataclasses import dataclass, field

from django.conf import settings
from django.db.models import F

from apps.ingest.decoding.limits import SpanReason
from apps.ingest.decoding.records import DecodeResult, Rejections, SpanRecord
from apps.ingest.models import Trace
from apps.ingest.trace_fill import trace_fill_among


@dataclass
class TraceCut:
    """A request's spans within their traces' limits, their rows, and what was refused."""

    decoded: DecodeResult
    rows: list[bytes]
    # Stored trace pk → (spans, bytes) refused.
    refused: dict[int, tuple[int, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class _Held:
    """What a trace holds already, as far as the door knows."""

    pk: int | None = None
    spans: int = 0
    size: int = 0
    has_root: bool = False


def trace_limits_apply(*, team_id: int, decoded: DecodeResult, rows: list[bytes]) -> TraceCut:
    """Reject the spans their traces have no room for; ``rows[i]`` is span ``i``'s row."""
    spans = decoded.spans
    cut = TraceCut(decoded=decoded, rows=rows)
    fills = trace_fill_among(team_id=team_id, trace_ids={span.trace_id for span in spans})
    max_spans, max_bytes = settings.INGEST_MAX_SPANS_PER_TRACE, settings.INGEST_MAX_TRACE_BYTES
    if not fills and len(spans) <= max_spans and sum(map(len, rows)) <= max_bytes:
        return cut  # no trace near a limit, and the whole request fits in any one trace
    by_trace: dict[bytes, list[int]] = {}
    for index, span in enumerate(spans):
        by_trace.setdefault(span.trace_id, []).append(index)
    stored = {t: _Held(f.pk, f.spans, f.size, f.has_root) for t, f in fills.items()}
    rejections = Rejections()
    refused: list[int] = []
    for trace_id, indexes in by_trace.items():
        held = stored.get(trace_id, _Held())
        over = _over_limits(held, [spans[i] for i in indexes], [len(rows[i]) for i in indexes])
        for position, reason, detail in over:
            index = indexes[position]
            rejections.add_over_budget(spans[index].span_id, reason, f"{reason} ({detail})")
            refused.append(index)
        if held.pk is not None and over:
            size = sum(len(rows[indexes[position]]) for position, _, _ in over)
            cut.refused[held.pk] = (len(over), size)
    if not refused:
        return cut
    left_out = set(refused)
    kept = [i for i in range(len(spans)) if i not in left_out]
    cut.decoded = decoded.rejecting([spans[i] for i in kept], rejections)
    cut.rows = [rows[i] for i in kept]
    return cut


def _over_limits(
    held: "_Held", spans: list[SpanRecord], sizes: list[int]
) -> list[tuple[int, str, str]]:
    """The positions of the spans one trace cannot take, with the reason and its detail.

    A trace that has no root takes its first one whatever its size, so that a trace cut
    short is still analyzed: one span of slack, as in the drain.
    """
    max_spans = settings.INGEST_MAX_SPANS_PER_TRACE
    max_bytes = settings.INGEST_MAX_TRACE_BYTES
    if held.spans + len(spans) <= max_spans and held.size + sum(sizes) <= max_bytes:
        return []
    count, total = held.spans, held.size
    over: list[tuple[int, str, str]] = []
    order = sorted(range(len(spans)), key=lambda i: _drain_order(spans[i]))
    for rank, position in enumerate(order):
        count += 1
        total += sizes[position]
        if rank == 0 and not held.has_root and spans[position].parent_span_id is None:
            continue
        if count > max_spans:
            over.append((position, SpanReason.TRACE_SPANS, f"span {count}, over {max_spans}"))
        elif total > max_bytes:
            over.append((position, SpanReason.TRACE_BYTES, f"{total} bytes, over {max_bytes}"))
    return over


def _drain_order(span: SpanRecord) -> tuple[bool, bytes, int, bytes]:
    root = span.parent_span_id is None
    return (not root, span.span_id if root else b"", span.start_ns, span.span_id)


def trace_refusals_count(*, refused: dict[int, tuple[int, int]]) -> None:
    """Add spans refused at the door to their traces' counts; call inside a transaction.

    The traces are locked in id order, as drains lock them, so the two never deadlock.
    """
    if not refused:
        return
    pks = sorted(refused)
    list(Trace.objects.select_for_update().filter(pk__in=pks).order_by("pk").values_list("pk"))
    for pk in pks:
        spans, size = refused[pk]
        Trace.objects.filter(pk=pk).update(
            spans_dropped=F("spans_dropped") + spans, bytes_dropped=F("bytes_dropped") + size
        )
