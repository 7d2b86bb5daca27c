"""Spans no rule takes belong to the stage of their nearest ancestor that one did.

Auto-instrumentation nests database, HTTP and SDK spans under the application's
own spans; a rule for ``retrieval`` must bring the ``query docs`` span inside it
along, or the stage's critical-path time would fall to "untracked" whenever a
child holds the path. So a span that no rule takes inherits:

- the stage of its parent, which is the parent's own stage or the one the parent
  inherited in turn; under a parent split at its first token (an LLM call), the
  child's time before that token goes to the parent's stage before it and the rest
  to the stage after it, as the parent's own time does (an HTTP span inside a chat
  span is first-token wait, then generation);
- nothing below a span that a no-stage rule took, nor below one in no stage at all
  (the root, usually): those stay untracked.

A span a rule takes keeps its own stage, whatever its ancestors'. Spans that only
reach each other through a parent cycle are not below the root and keep their own
match. The walk is iterative, so deep chains cannot overflow.
"""

from apps.analysis.critical_path import children_by_parent
from apps.analysis.spans import Span
from apps.analysis.stage_matching import SpanMatch, StageMatcher


def trace_matches(
    by_id: dict[str, Span], root: Span, matcher: StageMatcher
) -> dict[str, SpanMatch]:
    """Each span's match after inheritance, for spans made unique, with their root."""
    return inherited_matches(by_id, root, matcher, children_by_parent(by_id, root))


def inherited_matches(
    by_id: dict[str, Span],
    root: Span,
    matcher: StageMatcher,
    children: dict[str, list[Span]],
) -> dict[str, SpanMatch]:
    """Each span's match after inheritance; ``children`` is ``children_by_parent``'s answer."""
    # Changed in place: a span's own match is read once, when its parent is walked, before
    # anything replaces it; its parent's is read after, as inherited.
    matches = {span_id: matcher.match(span) for span_id, span in by_id.items()}
    stack = [root.span_id]
    while stack:
        parent_id = stack.pop()
        kids = children.get(parent_id)
        if not kids:
            continue
        parent = matches[parent_id]
        source = parent_id if parent.decided else parent.inherited_from
        if source is None:
            stack.extend(child.span_id for child in kids)
            continue
        for child in kids:
            child_id = child.span_id
            if not matches[child_id].decided:
                matches[child_id] = _inherit(parent, child, source)
            stack.append(child_id)
    return matches


def _inherit(parent: SpanMatch, child: Span, source: str) -> SpanMatch:
    token = parent.first_token_ns
    if token is not None and len(parent.pieces(child.start_ns, child.stop_ns)) > 1:
        return SpanMatch(
            token,
            parent.before_stage,
            parent.after_stage,
            inherited_from=source,
            engine=parent.engine,
        )
    stage = parent.stage_at(child.start_ns)
    return SpanMatch(None, stage, stage, inherited_from=source)
