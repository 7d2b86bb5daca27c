"""The critical path of one trace: which span was holding up the root at each instant."""

from collections.abc import Iterable
from dataclasses import dataclass, field

from apps.analysis.spans import Span, unique_spans


# Not frozen: a frozen dataclass costs five times as much to build, and trace analysis
# builds several per span; instances are never changed after construction.
@dataclass(slots=True)
class Segment:
    """``[start_ns, end_ns)`` of the root window, spent in ``span_id`` itself."""

    span_id: str
    start_ns: int
    end_ns: int

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


@dataclass(frozen=True)
class CriticalPath:
    root: Span
    segments: tuple[Segment, ...]

    @property
    def e2e_ns(self) -> int:
        return self.root.duration_ns


def find_root(by_id: dict[str, Span]) -> Span:
    """The root among spans with no parent, or whose parent is not in the trace.

    Spans with no parent id at all come before orphans, then the longest, then
    the earliest start, then the smallest span id. When parent links form a
    cycle and no span qualifies, every span is a candidate.
    """
    if not by_id:
        raise ValueError("A trace needs at least one span.")
    candidates = [
        span
        for span in by_id.values()
        if span.parent_id is None or span.parent_id == span.span_id or span.parent_id not in by_id
    ] or list(by_id.values())
    return min(
        candidates,
        key=lambda s: (s.parent_id is not None, -s.duration_ns, s.start_ns, s.span_id),
    )


def children_by_parent(by_id: dict[str, Span], root: Span) -> dict[str, list[Span]]:
    """Children per span id; every other span without a parent in the trace hangs off the root."""
    children: dict[str, list[Span]] = {}
    for span in by_id.values():
        if span.span_id == root.span_id:
            continue
        parent = span.parent_id
        if parent is None or parent == span.span_id or parent not in by_id:
            parent = root.span_id
        children.setdefault(parent, []).append(span)
    return children


@dataclass(slots=True)
class _Frame:
    span_id: str
    start_ns: int
    cursor_ns: int
    # (clipped end, clipped start, span id), last finishing first.
    children: list[tuple[int, int, str]] = field(default_factory=list)
    index: int = 0

    def next_child(self) -> tuple[int, int, str] | None:
        """The child finishing last at or before the cursor; each child is offered once."""
        children = self.children
        while self.index < len(children) and self.cursor_ns > self.start_ns:
            child = children[self.index]
            self.index += 1
            if child[0] <= self.cursor_ns:
                return child
        return None


def _clipped_children(
    span_id: str, start_ns: int, stop_ns: int, children: dict[str, list[Span]]
) -> list[tuple[int, int, str]]:
    clipped = []
    for child in children.get(span_id, ()):
        child_start = max(child.start_ns, start_ns)
        child_stop = min(child.stop_ns, stop_ns)
        # Zero-length or outside the parent: nothing of it, nor of its children, is on the path.
        if child_start < child_stop:
            clipped.append((child_stop, child_start, child.span_id))
    clipped.sort(key=lambda c: (-c[0], c[1], c[2]))
    return clipped


def critical_path(spans: Iterable[Span]) -> CriticalPath:
    """The critical path of one trace, as contiguous segments covering the root's window.

    Contract:

    - Root: see ``find_root``. Spans whose parent is not in the trace (and any
      other parentless span) are treated as children of the root. Spans that
      only reach each other through a parent cycle are not on the path.
    - Clock skew: a span that ends before it starts lasts zero.
    - Clipping: each child counts only inside its parent's (already clipped)
      window; a child wholly outside it, or of zero length, is ignored with its
      descendants.
    - Walk: from the root's end, the cursor moves backwards. At each step the
      child that finishes last among those with end <= cursor is taken; an end
      equal to the cursor qualifies, so back-to-back siblings both stay on the
      path. Children ending at the same instant go longest (earliest start)
      first, then by span id. ``[child end, cursor)`` is the parent's own time;
      the child's window is walked the same way; then the cursor jumps to the
      child's start. Children still running at the cursor overlap the path and
      are skipped for good. When no child fits, ``[parent start, cursor)`` is the
      parent's own time.
    - Output: segments in time order, contiguous, non-overlapping, of positive
      length, from root start to root end exactly; none when the root lasts zero.
      The result does not depend on input order.

    Runs in O(n log n) with an explicit stack, so deep chains cannot overflow.
    """
    by_id = unique_spans(spans)
    return critical_path_from(by_id, find_root(by_id))


def critical_path_from(
    by_id: dict[str, Span], root: Span, children: dict[str, list[Span]] | None = None
) -> CriticalPath:
    """``critical_path`` of spans already made unique (``unique_spans``), with their root;
    ``children`` is ``children_by_parent``'s answer, when the caller has it already."""
    if children is None:
        children = children_by_parent(by_id, root)
    backwards: list[Segment] = []
    stack = [
        _Frame(
            root.span_id,
            root.start_ns,
            root.stop_ns,
            _clipped_children(root.span_id, root.start_ns, root.stop_ns, children),
        )
    ]
    while stack:
        frame = stack[-1]
        child = frame.next_child()
        if child is None:
            if frame.start_ns < frame.cursor_ns:
                backwards.append(Segment(frame.span_id, frame.start_ns, frame.cursor_ns))
            stack.pop()
            continue
        child_stop, child_start, child_id = child
        if child_stop < frame.cursor_ns:
            backwards.append(Segment(frame.span_id, child_stop, frame.cursor_ns))
        # The child's segments are all emitted before this frame resumes, below its start.
        frame.cursor_ns = child_start
        stack.append(
            _Frame(
                child_id,
                child_start,
                child_stop,
                _clipped_children(child_id, child_start, child_stop, children),
            )
        )
    backwards.reverse()
    return CriticalPath(root=root, segments=tuple(backwards))
