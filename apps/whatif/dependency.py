"""A trace's dependency model, inferred from its timing, as rows for the vectorized replay.

Every span has a start event and an end event. Their dependencies:

- A span starts once its parent has started and once its predecessor has ended: the
  latest-ending sibling that ended before it started. The gap to that anchor is kept;
  it is the parent's own time (orchestration), charged to the parent's stage.
- A span with children that ended within it ends once they have all ended, plus the
  tail it spent after the last of them (its own time). Children still running at its
  end (fire and forget) do not hold it.
- A span without such children ends its own duration after it starts; an LLM span's
  duration is split at its first token into the stages of its two parts.

Evaluated as the latest of its dependencies plus their gaps, event by event, this
reproduces the trace exactly; a change (``apps.whatif.changes``) rescales the gaps
and durations, or drops the ordering edge between two stages, and the events are
evaluated again.

For ``parallel``, each start dependency on a sibling comes with two spare edges, live
only when the two spans' stages are made parallel: the span starts with its
predecessor instead of after it, and a span whose predecessor was the one moved waits
for that one's own predecessor too. Dropping one ordering edge so keeps every other
order: what came after the pair still waits for both. Which edges are live depends on
the scenario, which is why all are kept.
"""

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field

from apps.analysis.critical_path import children_by_parent
from apps.analysis.spans import Span
from apps.analysis.stage_matching import SpanMatch

# When an edge is live: always; unless its two spans' stages run in parallel; only then.
ALWAYS, UNLESS_PARALLEL, IF_PARALLEL = 0, 1, 2
NO_STAGE = -1  # a span whose ordering stage is none, or mixed


@dataclass
class ModelRows:
    """The nodes and edges of many traces, as plain lists until they become arrays.

    Node ids are global: a trace's span ``i`` (preorder) has start ``base + 2i`` and end
    ``base + 2i + 1``. Times are nanoseconds relative to the trace's root start.
    """

    stage_count: int  # stages 0..n-1; index n is untracked time
    # Per trace
    trace_keys: list[int] = field(default_factory=list)  # the caller's id (a Trace pk)
    trace_node_base: list[int] = field(default_factory=list)
    # Per node
    node_level: list[int] = field(default_factory=list)
    node_trace: list[int] = field(default_factory=list)
    node_time: list[int] = field(default_factory=list)  # as observed
    # Per end node (span): where a cap cuts a whole-stage span
    span_start_node: list[int] = field(default_factory=list)
    span_whole_stage: list[int] = field(default_factory=list)  # NO_STAGE unless whole
    span_is_leaf: list[bool] = field(default_factory=list)
    # Per span: its stage parts for wall time, as offsets of the span's own events
    span_before_stage: list[int] = field(default_factory=list)
    span_after_stage: list[int] = field(default_factory=list)
    span_token_offset: list[int] = field(default_factory=list)  # -1: no split
    # Per edge
    edge_src: list[int] = field(default_factory=list)
    edge_dst: list[int] = field(default_factory=list)
    edge_owner: list[int] = field(default_factory=list)  # global span index whose time it is
    edge_stage_a: list[int] = field(default_factory=list)
    edge_ns_a: list[int] = field(default_factory=list)
    edge_stage_b: list[int] = field(default_factory=list)
    edge_ns_b: list[int] = field(default_factory=list)
    edge_fixed: list[int] = field(default_factory=list)  # negative gaps (clock skew), kept
    edge_duration: list[bool] = field(default_factory=list)  # a leaf's start-to-end edge
    edge_toggle: list[int] = field(default_factory=list)
    edge_pair_a: list[int] = field(default_factory=list)
    edge_pair_b: list[int] = field(default_factory=list)
    span_count: int = 0

    @property
    def trace_count(self) -> int:
        return len(self.trace_keys)


@dataclass(slots=True)
class _Local:
    span: Span
    match: SpanMatch
    parent: "_Local | None"
    index: int = 0  # preorder, within the trace
    position: int = 0  # among its siblings, in (end, start, id) order
    children: list["_Local"] = field(default_factory=list)
    child_ends: list[int] = field(default_factory=list)
    order_stage: int = NO_STAGE


def _preorder(by_id: dict[str, Span], root: Span, matches: dict[str, SpanMatch]) -> list[_Local]:
    """Spans reachable from the root, parents first; children by (end, start, id)."""
    children = children_by_parent(by_id, root)
    top = _Local(root, matches[root.span_id], None)
    ordered: list[_Local] = []
    stack = [top]
    while stack:
        local = stack.pop()
        local.index = len(ordered)
        ordered.append(local)
        kids = sorted(
            children.get(local.span.span_id, ()), key=lambda s: (s.stop_ns, s.start_ns, s.span_id)
        )
        local.children = [
            _Local(kid, matches[kid.span_id], local, position=position)
            for position, kid in enumerate(kids)
        ]
        local.child_ends = [kid.stop_ns for kid in kids]
        stack.extend(reversed(local.children))
    return ordered


def _whole_stage(match: SpanMatch, stages: dict[str, int]) -> int:
    if not match.splits:
        return stages.get(match.before_stage or "", NO_STAGE)
    return NO_STAGE


def _engine_parts_as_spans(
    by_id: dict[str, Span], root: Span, matches: dict[str, SpanMatch]
) -> tuple[dict[str, Span], dict[str, SpanMatch]]:
    """A leaf split by a serving engine's timings (gateway, queue, prefill, decode) stands
    as a parent of one child per part, each whole in its stage, so the replay's edges, which
    carry two stages at most, keep every part apart. Spans with children of their own keep
    their match; an own-time piece of theirs that crosses more than two parts is folded
    (``_TraceBuilder.piece``)."""
    split = [span_id for span_id, match in matches.items() if match.engine is not None]
    if not split:
        return by_id, matches
    children = children_by_parent(by_id, root)
    by_id, matches = dict(by_id), dict(matches)
    for span_id in split:
        if span_id in children or span_id not in by_id:
            continue
        span, match = by_id[span_id], matches[span_id]
        for number, (start, end, stage) in enumerate(match.parts(span)):
            part = Span(
                span_id=f"{span_id}/{number}",
                parent_id=span_id,
                name=span.name,
                service=span.service,
                kind=span.kind,
                start_ns=start,
                end_ns=end,
            )
            by_id[part.span_id] = part
            matches[part.span_id] = SpanMatch(None, stage, stage, inherited_from=span_id)
        matches[span_id] = SpanMatch(None, None, None, inherited_from=match.inherited_from)
    return by_id, matches


def _order_stages(ordered: list[_Local], stages: dict[str, int]) -> None:
    """The stage a span counts as when two stages are made parallel: its own (an LLM
    span split at its first token: its first part's), else the one stage that all its
    staged descendants share (a wrapper around them), else none."""
    below: list[set[int]] = [set() for _ in ordered]
    for local in reversed(ordered):  # children before parents
        own = stages.get(local.match.before_stage or "", NO_STAGE)
        if own != NO_STAGE:
            local.order_stage = own
            below[local.index] = {own}
            continue
        found: set[int] = set()
        for child in local.children:
            found |= below[child.index]
        local.order_stage = next(iter(found)) if len(found) == 1 else NO_STAGE
        below[local.index] = found


def _joined(local: _Local) -> list[_Local]:
    """Children that ended within the span: it waited for them."""
    stop = local.span.stop_ns
    return [child for child in local.children if child.span.stop_ns <= stop]


def _predecessor(local: _Local) -> _Local | None:
    """The sibling ending last among those that ended by this one's start and come before
    it in (end, start, id) order; the order breaks ties between zero-length siblings."""
    parent = local.parent
    if parent is None:
        return None
    candidates = min(bisect_right(parent.child_ends, local.span.start_ns), local.position)
    return parent.children[candidates - 1] if candidates else None


class _TraceBuilder:
    """Appends one trace's events and edges to the rows."""

    def __init__(self, rows: ModelRows, ordered: list[_Local], stages: dict[str, int]) -> None:
        self.rows = rows
        self.stages = stages
        self.untracked = rows.stage_count
        self.base = len(rows.node_level)
        self.span_base = rows.span_count
        self.levels = [0] * (2 * len(ordered))

    def piece(self, local: _Local, start: int, end: int) -> tuple[int, int, int, int, int]:
        """``[start, end)`` of ``local``'s own time as (stage a, ns a, stage b, ns b, fixed)."""
        untracked = self.untracked
        if end < start:
            return untracked, 0, untracked, 0, end - start
        match = local.match
        token = match.first_token_ns
        if token is not None and start < token < end:
            pieces = match.pieces(start, end)
            first_end = pieces[0][1]
            # More than two pieces only in the own time of a span with children that an
            # engine's timings split: the rest goes to the last piece's stage.
            return (
                self.stages.get(pieces[0][2] or "", untracked),
                first_end - start,
                self.stages.get(pieces[-1][2] or "", untracked),
                end - first_end,
                0,
            )
        stage = self.stages.get(match.stage_at(start) or "", untracked)
        return stage, end - start, stage, 0, 0

    def edge(
        self,
        src: int,
        dst: int,
        owner: _Local,
        piece: tuple[int, int, int, int, int],
        *,
        duration: bool = False,
        toggle: int = ALWAYS,
        pair: tuple[int, int] = (NO_STAGE, NO_STAGE),
    ) -> None:
        rows = self.rows
        rows.edge_src.append(self.base + src)
        rows.edge_dst.append(self.base + dst)
        rows.edge_owner.append(self.span_base + owner.index)
        stage_a, ns_a, stage_b, ns_b, fixed = piece
        rows.edge_stage_a.append(stage_a)
        rows.edge_ns_a.append(ns_a)
        rows.edge_stage_b.append(stage_b)
        rows.edge_ns_b.append(ns_b)
        rows.edge_fixed.append(fixed)
        rows.edge_duration.append(duration)
        rows.edge_toggle.append(toggle)
        rows.edge_pair_a.append(pair[0])
        rows.edge_pair_b.append(pair[1])
        self.levels[dst] = max(self.levels[dst], self.levels[src] + 1)

    def start_edges(self, local: _Local) -> None:
        parent = local.parent
        assert parent is not None
        start = 2 * local.index
        before = _predecessor(local)
        if before is None:
            piece = self.piece(parent, parent.span.start_ns, local.span.start_ns)
            self.edge(2 * parent.index, start, parent, piece)
            return
        piece = self.piece(parent, before.span.stop_ns, local.span.start_ns)
        pair = (before.order_stage, local.order_stage)
        self.edge(2 * before.index + 1, start, parent, piece, toggle=UNLESS_PARALLEL, pair=pair)
        self.edge(2 * before.index, start, parent, piece, toggle=IF_PARALLEL, pair=pair)
        earlier = _predecessor(before)
        if earlier is not None:
            extra = (earlier.order_stage, before.order_stage)
            self.edge(2 * earlier.index + 1, start, parent, piece, toggle=IF_PARALLEL, pair=extra)

    def end_edges(self, local: _Local) -> None:
        span = local.span
        end = 2 * local.index + 1
        joined = _joined(local)
        if not joined:
            piece = self.piece(local, span.start_ns, span.stop_ns)
            self.edge(2 * local.index, end, local, piece, duration=True)
            return
        last = max(child.span.stop_ns for child in joined)
        piece = self.piece(local, last, span.stop_ns)
        for child in joined:
            self.edge(2 * child.index + 1, end, local, piece)


def model_add_trace(
    rows: ModelRows,
    *,
    key: int,
    by_id: dict[str, Span],
    root: Span,
    matches: dict[str, SpanMatch],
    stages: dict[str, int],
) -> None:
    """Append one trace's events and edges; ``stages`` maps slugs to 0..stage_count-1.

    ``by_id`` are the trace's spans made unique (``unique_spans``), ``matches`` their
    stage matches. Spans that only reach the root through a parent cycle are left out,
    as the critical path leaves them out.
    """
    by_id, matches = _engine_parts_as_spans(by_id, root, matches)
    ordered = _preorder(by_id, root, matches)
    _order_stages(ordered, stages)
    builder = _TraceBuilder(rows, ordered, stages)
    trace_index = rows.trace_count
    rows.trace_keys.append(key)
    rows.trace_node_base.append(builder.base)

    # Events in an order where every dependency comes first: a span's start, then its
    # children (each after its predecessor's whole subtree), then its end.
    stack: list[tuple[_Local, bool]] = [(ordered[0], False)]
    while stack:
        local, done = stack.pop()
        if done:
            builder.end_edges(local)
            continue
        if local.parent is not None:
            builder.start_edges(local)
        stack.append((local, True))
        stack.extend((child, False) for child in reversed(local.children))

    origin = root.start_ns
    times: list[int] = []
    for local in ordered:
        span, match = local.span, local.match
        times += [span.start_ns - origin, span.stop_ns - origin]
        rows.span_start_node.append(builder.base + 2 * local.index)
        rows.span_whole_stage.append(_whole_stage(match, stages))
        rows.span_is_leaf.append(not _joined(local))
        rows.span_before_stage.append(stages.get(match.before_stage or "", NO_STAGE))
        rows.span_after_stage.append(stages.get(match.after_stage or "", NO_STAGE))
        token = match.first_token_ns
        rows.span_token_offset.append(-1 if token is None else token - span.start_ns)
    rows.node_level.extend(builder.levels)
    rows.node_trace.extend([trace_index] * len(builder.levels))
    rows.node_time.extend(times)
    rows.span_count += len(ordered)


def stage_index(slugs: Sequence[str]) -> dict[str, int]:
    return {slug: index for index, slug in enumerate(slugs)}
