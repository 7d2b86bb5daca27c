"""One trace's time per stage: wall time, span count, errors and critical-path time.

Per trace, the stages' critical-path time plus the untracked critical-path time
equals the root's duration exactly (integer nanoseconds). A span no rule takes
counts in the stage of its nearest ancestor one did (``apps.analysis.stage_inheritance``),
so "untracked" is the time under no stage span.
"""

from collections.abc import Iterable
from dataclasses import dataclass

from apps.analysis.critical_path import children_by_parent, critical_path_from, find_root
from apps.analysis.spans import Span, unique_spans
from apps.analysis.stage_inheritance import inherited_matches
from apps.analysis.stage_matching import SpanMatch, StageMatcher


# Not frozen: a frozen dataclass costs five times as much to build, and trace analysis
# builds several per span; instances are never changed after construction.
@dataclass(slots=True)
class StageResult:
    """``wall_ns`` is the union of the stage's span parts as measured, not clipped to
    the root (a span running past its parent still took that long); ``span_count``
    counts spans with a part in the stage, zero-length parts included."""

    wall_ns: int
    span_count: int
    error: bool
    critical_ns: int


@dataclass(slots=True)
class ChargedSegment:
    span_id: str
    start_ns: int
    end_ns: int
    stage: str | None  # None: untracked

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


@dataclass(frozen=True)
class TraceAttribution:
    root_span_id: str
    e2e_ns: int
    error: bool
    stages: dict[str, StageResult]  # in stage order, only stages that claimed a span part
    untracked_critical_ns: int
    segments: tuple[ChargedSegment, ...]
    matches: dict[str, SpanMatch]  # per span id, after inheritance: its stage and why


def union_ns(intervals: list[tuple[int, int]]) -> int:
    total = 0
    reach: int | None = None
    for start, end in sorted(intervals):
        if reach is None or start > reach:
            total += end - start
            reach = end
        elif end > reach:
            total += end - reach
            reach = end
    return total


def _charge(span_id: str, start: int, end: int, match: SpanMatch) -> list[ChargedSegment]:
    token = match.first_token_ns
    if token is None or not start < token:
        return [ChargedSegment(span_id, start, end, match.stage_at(start))]
    return [ChargedSegment(span_id, lo, hi, stage) for lo, hi, stage in match.pieces(start, end)]


def attribute_trace(spans: Iterable[Span], matcher: StageMatcher) -> TraceAttribution:
    """Attribute one trace's spans to the matcher's stages; raises ValueError on no spans."""
    by_id = unique_spans(spans)
    return attribute_spans(by_id, find_root(by_id), matcher)


def attribute_spans(by_id: dict[str, Span], root: Span, matcher: StageMatcher) -> TraceAttribution:
    """``attribute_trace`` of spans already made unique (``unique_spans``), with their root."""
    children = children_by_parent(by_id, root)
    path = critical_path_from(by_id, root, children)
    matches = inherited_matches(by_id, root, matcher, children)

    intervals: dict[str, list[tuple[int, int]]] = {}
    counts: dict[str, int] = {}
    errors: dict[str, bool] = {}
    for span_id, span in by_id.items():
        claimed = set()
        for start, end, stage in matches[span_id].parts(span):
            if stage is not None:
                intervals.setdefault(stage, []).append((start, end))
                claimed.add(stage)
        for stage in claimed:
            counts[stage] = counts.get(stage, 0) + 1
            errors[stage] = errors.get(stage, False) or span.status_error

    segments = [
        charged
        for segment in path.segments
        for charged in _charge(
            segment.span_id, segment.start_ns, segment.end_ns, matches[segment.span_id]
        )
    ]
    critical: dict[str | None, int] = {}
    for charged in segments:
        critical[charged.stage] = critical.get(charged.stage, 0) + charged.duration_ns

    stages = {
        slug: StageResult(
            wall_ns=union_ns(intervals[slug]),
            span_count=counts[slug],
            error=errors[slug],
            critical_ns=critical.get(slug, 0),
        )
        for slug in matcher.stage_slugs
        if slug in counts
    }
    return TraceAttribution(
        root_span_id=path.root.span_id,
        e2e_ns=path.e2e_ns,
        error=any(span.status_error for span in by_id.values()),
        stages=stages,
        untracked_critical_ns=critical.get(None, 0),
        segments=tuple(segments),
        matches=matches,
    )
