"""Our critical path against Jaeger UI's: the span timings of its critical-path test cases
(jaeger-ui, ``packages/jaeger-ui/src/components/TracePage/CriticalPath/testCases/``,
test1 to test9) transcribed as our spans, and its expected sections checked.

Jaeger times are microseconds; here they are the same numbers in nanoseconds times
1000. Jaeger lists sections backwards from the root's end; ours run forwards, so each
expected list is given in time order. Where the two differ in meaning, the case says so
and checks what they agree on.

Then the same traces with stage rules, inheritance and no-stage rules: the path, span by
span and nanosecond by nanosecond, is the same whatever the rules; they only decide where
each segment is charged.
"""

from dataclasses import dataclass

import pytest

from apps.analysis.attribution import attribute_trace
from apps.analysis.critical_path import critical_path
from apps.analysis.spans import Span
from apps.analysis.stage_matching import (
    AFTER_FIRST_TOKEN,
    UNTIL_FIRST_TOKEN,
    RuleSpec,
    StageMatcher,
    StageSpec,
)
from tests.builders.spans import span

US = 1000  # Jaeger's microsecond in our nanoseconds


def jspan(span_id: str, parent: str | None, start: int, duration: int) -> Span:
    """A Jaeger test span (start and duration in µs), its CHILD_OF reference as our parent."""
    return span(span_id, parent, start * US, (start + duration) * US, name=f"op {span_id}")


@dataclass(frozen=True)
class Case:
    name: str
    spans: list[Span]
    # Jaeger's expected sections, in time order: (span id, start µs, end µs).
    jaeger: list[tuple[str, int, int]]


CASES = [
    # Two children one after the other: the parent's own time between and around them.
    Case(
        "test1",
        [jspan("E", "C", 50, 10), jspan("C", None, 1, 100), jspan("D", "C", 20, 20)],
        [("C", 1, 20), ("D", 20, 40), ("C", 40, 50), ("E", 50, 60), ("C", 60, 101)],
    ),
    # Overlapping children: only the last finishing one, the other overlaps it.
    Case(
        "test2",
        [jspan("X", None, 1, 100), jspan("A", "X", 10, 40), jspan("C", "X", 20, 40)],
        [("X", 1, 20), ("C", 20, 60), ("X", 60, 101)],
    ),
    # A child that starts after its parent ended is not on the path (Jaeger drops it; we
    # clip it to the parent's window, where nothing of it is left).
    Case(
        "test3",
        [
            jspan("006c3cf93508f205", None, 100, 40),
            jspan("2dc4b796e2127e32", "006c3cf93508f205", 200, 300),
        ],
        [("006c3cf93508f205", 100, 140)],
    ),
    # The same with a grandchild: dropped with its parent.
    Case(
        "test4",
        [jspan("A", None, 1, 30), jspan("B", "A", 40, 40), jspan("C", "B", 50, 10)],
        [("A", 1, 31)],
    ),
    # test5 (a FOLLOWS_FROM child) differs in meaning: see below.
    # A child overflowing its parent's end, and a grandchild starting before its parent:
    # both cut to the window above them.
    Case(
        "test6",
        [jspan("A", None, 1, 29), jspan("B", "A", 15, 20), jspan("C", "B", 10, 15)],
        [("A", 1, 15), ("C", 15, 25), ("B", 25, 30)],
    ),
    Case(
        "test7",
        [jspan("A", None, 1, 29), jspan("B", "A", 15, 20), jspan("C", "B", 20, 20)],
        [("A", 1, 15), ("B", 15, 20), ("C", 20, 30)],
    ),
    # A child longer than its parent on both sides holds all of the parent's window.
    Case(
        "test8",
        [jspan("A", None, 10, 20), jspan("B", "A", 5, 30)],
        [("B", 10, 30)],
    ),
    # A child wholly before its parent started is not on the path.
    Case(
        "test9",
        [jspan("A", None, 10, 20), jspan("B", "A", 1, 4)],
        [("A", 10, 30)],
    ),
]
IDS = [case.name for case in CASES]


def ours(spans: list[Span]) -> list[tuple[str, int, int]]:
    return [(s.span_id, s.start_ns, s.end_ns) for s in critical_path(spans).segments]


def in_ns(sections: list[tuple[str, int, int]]) -> list[tuple[str, int, int]]:
    return [(span_id, start * US, end * US) for span_id, start, end in sections]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_our_critical_path_is_jaeger_s(case: Case) -> None:
    assert ours(case.spans) == in_ns(case.jaeger)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_answer_does_not_depend_on_the_order_spans_arrive_in(case: Case) -> None:
    assert ours(list(reversed(case.spans))) == in_ns(case.jaeger)


def test_test5_a_follows_from_child_is_blocking_here() -> None:
    """Jaeger leaves a FOLLOWS_FROM child, and what it holds, off the path: A alone, 1-31.

    OpenTelemetry has no reference types: a span that only follows from another is
    exported with it as parent (the OpenTracing compatibility rules), or with a link that
    analysis does not read and no parent, when it hangs off the root. Either way it is a
    child here, and on the path when it finishes last. What agrees: the path covers the
    root's window exactly, and outside B's window it is Jaeger's.
    """
    jaeger = [("A", 1, 31)]
    for parent in ("A", None):
        spans = [jspan("A", None, 1, 30), jspan("B", parent, 10, 10), jspan("C", "B", 12, 2)]
        path = ours(spans)
        assert path == in_ns([("A", 1, 10), ("B", 10, 12), ("C", 12, 14), ("B", 14, 20),
                              ("A", 20, 31)])  # fmt: skip
        outside_b = [s for s in path if s[2] <= 10 * US or s[1] >= 20 * US]
        assert outside_b == in_ns([("A", 1, 10), ("A", 20, 31)])
        assert (path[0][1], path[-1][2]) == (jaeger[0][1] * US, jaeger[0][2] * US)


def test_back_to_back_siblings_are_a_tie_we_resolve_differently() -> None:
    """Not a Jaeger test case: its rule read off ``findLastFinishingChildSpan``. Walking
    back, Jaeger takes the next child only if it ended strictly before the last one
    started, so of siblings back to back only the later is on its path, and the parent
    holds the earlier one's time; ours takes a child ending exactly at the cursor too.
    What agrees: the later sibling's segment, and the root's window covered exactly."""
    spans = [jspan("root", None, 0, 20), jspan("a", "root", 0, 10), jspan("b", "root", 10, 10)]
    jaeger = in_ns([("root", 0, 10), ("b", 10, 20)])
    path = ours(spans)
    assert path == in_ns([("a", 0, 10), ("b", 10, 20)])
    assert path[-1] == jaeger[-1]
    assert sum(end - start for _, start, end in path) == 20 * US


# Stage rules for the cases' spans, with inheritance at work: a rule for a parent brings
# its children along, a no-stage rule keeps a subtree out, a split at a first token.
MATCHERS = {
    "no rules": StageMatcher([]),
    "a rule per parent": StageMatcher(
        [
            StageSpec("first", [RuleSpec(span_name="op C")], 0),
            StageSpec("second", [RuleSpec(span_name="op B"), RuleSpec(span_name="op X")], 1),
        ]
    ),
    "root in a stage, a no-stage subtree": StageMatcher(
        [StageSpec("everything", [RuleSpec(span_name="op A")], 0)],
        [RuleSpec(span_name="op B"), RuleSpec(span_name="op E")],
    ),
    "split at a first token": StageMatcher(
        [
            StageSpec("ttft", [RuleSpec(span_name="op *", portion=UNTIL_FIRST_TOKEN)], 0),
            StageSpec("generation", [RuleSpec(span_name="op *", portion=AFTER_FIRST_TOKEN)], 1),
        ]
    ),
}


def with_first_tokens(spans: list[Span]) -> list[Span]:
    """Each span with a first token a quarter of the way in, for the splitting rules."""
    return [
        span(
            s.span_id,
            s.parent_id,
            s.start_ns,
            s.end_ns,
            name=s.name,
            events=[("first_token", s.start_ns + (s.end_ns - s.start_ns) // 4)],
        )
        for s in spans
    ]


@pytest.mark.parametrize("case", CASES, ids=IDS)
@pytest.mark.parametrize("rules", list(MATCHERS))
def test_rules_and_inheritance_change_the_charging_not_the_path(case: Case, rules: str) -> None:
    spans = with_first_tokens(case.spans)
    matcher = MATCHERS[rules]
    result = attribute_trace(spans, matcher)

    # The charged segments, a first token's cut healed, are the path itself.
    healed: list[tuple[str, int, int]] = []
    for segment in result.segments:
        if healed and healed[-1][0] == segment.span_id and healed[-1][2] == segment.start_ns:
            healed[-1] = (segment.span_id, healed[-1][1], segment.end_ns)
        else:
            healed.append((segment.span_id, segment.start_ns, segment.end_ns))
    assert healed == ours(spans) == in_ns(case.jaeger)

    # Each segment goes where its span's match, after inheritance, puts that instant.
    for segment in result.segments:
        assert segment.stage == result.matches[segment.span_id].stage_at(segment.start_ns)
    total = sum(stage.critical_ns for stage in result.stages.values())
    assert total + result.untracked_critical_ns == result.e2e_ns


def test_a_rule_for_the_parent_charges_its_children_s_path_time_to_its_stage() -> None:
    """test1 with a rule for C only: D and E, on the path, now count in C's stage."""
    spans = CASES[0].spans
    before = attribute_trace(spans, StageMatcher([]))
    after = attribute_trace(spans, MATCHERS["a rule per parent"])
    assert before.untracked_critical_ns == 100 * US
    assert after.stages["first"].critical_ns == 100 * US
    assert after.untracked_critical_ns == 0
    assert [(s.span_id, s.start_ns, s.end_ns) for s in after.segments] == [
        (s.span_id, s.start_ns, s.end_ns) for s in before.segments
    ]
