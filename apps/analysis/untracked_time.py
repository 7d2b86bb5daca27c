"""One trace's untracked time taken apart: which of it a missing rule explains.

After inheritance (``apps.analysis.stage_inheritance``) a segment of the critical path
is untracked when its span's part is in no stage. That is one of four things:

- the root span's own time: the request's orchestration between its stages;
- a span a no-stage rule took, or one under it that no rule took: untracked on purpose;
- a part of a span a stage took only in part (an LLM call with a rule for its time to
  first token and none for the rest), or of a span inheriting such a part;
- a span no rule took and no stage span holds: an *unmatched* span, the only kind a new
  rule would bring into a stage.

The four add up to the trace's untracked critical-path time exactly. An unmatched span
holds the unmatched spans under it: a rule for it would bring them along (they would
inherit its stage), so each says what it holds, and which unmatched span holds it.
"""

from dataclasses import dataclass, field

from apps.analysis.attribution import attribute_spans
from apps.analysis.critical_path import children_by_parent, find_root
from apps.analysis.spans import Span
from apps.analysis.stage_matching import StageMatcher


@dataclass(slots=True)
class UnmatchedSpan:
    span: Span
    critical_ns: int  # its own time on the critical path
    held_ns: int  # that, and the critical-path time of the unmatched spans under it
    holder: Span | None  # the unmatched span it is directly under, if any


@dataclass
class TraceUntracked:
    e2e_ns: int
    untracked_ns: int
    root_ns: int = 0
    no_stage_ns: int = 0
    partial_ns: int = 0
    stages: tuple[str, ...] = ()  # the stages a span part of the trace is in
    unmatched: list[UnmatchedSpan] = field(default_factory=list)

    @property
    def unmatched_ns(self) -> int:
        return sum(item.critical_ns for item in self.unmatched)


def trace_untracked(by_id: dict[str, Span], matcher: StageMatcher) -> TraceUntracked:
    """For spans made unique (``unique_spans``), at least one."""
    root = find_root(by_id)
    attribution = attribute_spans(by_id, root, matcher)
    matches = attribution.matches
    children = children_by_parent(by_id, root)
    found = TraceUntracked(
        e2e_ns=attribution.e2e_ns,
        untracked_ns=attribution.untracked_critical_ns,
        stages=tuple(attribution.stages),
    )

    # Depth first from the root, marking what is under a span a no-stage rule took.
    order: list[str] = []
    parent_of: dict[str, str] = {}
    on_purpose: set[str] = set()
    stack = [(root.span_id, matches[root.span_id].no_stage)]
    while stack:
        span_id, below_no_stage = stack.pop()
        order.append(span_id)
        for child in children.get(span_id, ()):
            match = matches[child.span_id]
            flag = match.no_stage if match.decided else below_no_stage
            if flag and not match.decided:
                on_purpose.add(child.span_id)
            parent_of[child.span_id] = span_id
            stack.append((child.span_id, flag))

    def unmatched(span_id: str) -> bool:
        match = matches[span_id]
        return not (
            match.decided
            or match.inherited_from is not None
            or span_id == root.span_id
            or span_id in on_purpose
        )

    critical: dict[str, int] = {}
    for segment in attribution.segments:
        if segment.stage is not None:
            continue
        span_id, match = segment.span_id, matches[segment.span_id]
        if match.no_stage or span_id in on_purpose:
            found.no_stage_ns += segment.duration_ns
        elif match.decided or match.inherited_from is not None:
            found.partial_ns += segment.duration_ns
        elif span_id == root.span_id:
            found.root_ns += segment.duration_ns
        else:
            critical[span_id] = critical.get(span_id, 0) + segment.duration_ns

    # Children before parents: what each unmatched span holds adds up to its holder.
    held = {span_id: critical.get(span_id, 0) for span_id in by_id if unmatched(span_id)}
    holder = {
        span_id: parent
        for span_id in held
        if (parent := parent_of.get(span_id)) is not None and parent in held
    }
    for span_id in reversed(order):
        if span_id in holder:
            held[holder[span_id]] += held[span_id]
    for span_id, amount in held.items():
        found.unmatched.append(
            UnmatchedSpan(
                span=by_id[span_id],
                critical_ns=critical.get(span_id, 0),
                held_ns=amount,
                holder=by_id[holder[span_id]] if span_id in holder else None,
            )
        )
    return found
