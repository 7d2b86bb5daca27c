import time

import pytest

from apps.analysis.critical_path import CriticalPath, critical_path
from tests.builders.spans import span


def as_tuples(path: CriticalPath) -> list[tuple[str, int, int]]:
    return [(s.span_id, s.start_ns, s.end_ns) for s in path.segments]


def test_root_alone_is_the_whole_path() -> None:
    path = critical_path([span("root", None, 0, 100)])
    assert as_tuples(path) == [("root", 0, 100)]
    assert path.e2e_ns == 100


def test_sequential_children_alternate_with_the_parents_own_time() -> None:
    spans = [
        span("root", None, 0, 100),
        span("a", "root", 10, 40),
        span("b", "root", 50, 90),
    ]
    assert as_tuples(critical_path(spans)) == [
        ("root", 0, 10),
        ("a", 10, 40),
        ("root", 40, 50),
        ("b", 50, 90),
        ("root", 90, 100),
    ]


def test_parallel_fan_out_counts_only_the_last_finishing_branch() -> None:
    spans = [
        span("root", None, 0, 100),
        span("a", "root", 10, 60),
        span("b", "root", 10, 80),
        span("c", "root", 10, 30),
    ]
    assert as_tuples(critical_path(spans)) == [("root", 0, 10), ("b", 10, 80), ("root", 80, 100)]


def test_back_to_back_siblings_are_both_on_the_path() -> None:
    spans = [span("root", None, 0, 20), span("a", "root", 0, 10), span("b", "root", 10, 20)]
    assert as_tuples(critical_path(spans)) == [("a", 0, 10), ("b", 10, 20)]


def test_the_sibling_ending_exactly_at_the_cursor_wins_over_an_earlier_one() -> None:
    spans = [
        span("root", None, 100, 200),
        span("early", "root", 100, 120),
        span("exact", "root", 120, 150),
        span("late", "root", 150, 200),
        span("overlapping", "root", 110, 151),
    ]
    assert as_tuples(critical_path(spans)) == [
        ("early", 100, 120),
        ("exact", 120, 150),
        ("late", 150, 200),
    ]


def test_overlapping_siblings_hand_over_at_the_later_ones_start() -> None:
    spans = [
        span("root", None, 0, 100),
        span("a", "root", 0, 60),
        span("b", "root", 40, 90),
        span("b1", "b", 50, 70),
    ]
    assert as_tuples(critical_path(spans)) == [
        ("root", 0, 40),
        ("b", 40, 50),
        ("b1", 50, 70),
        ("b", 70, 90),
        ("root", 90, 100),
    ]


def test_children_ending_together_go_longest_first() -> None:
    spans = [
        span("root", None, 0, 100),
        span("a-short", "root", 20, 50),
        span("b-long", "root", 0, 50),
    ]
    assert as_tuples(critical_path(spans)) == [("b-long", 0, 50), ("root", 50, 100)]


def test_a_child_running_past_its_parent_counts_until_the_parents_end() -> None:
    spans = [
        span("root", None, 0, 100),
        span("p", "root", 10, 50),
        span("c", "p", 30, 80),
    ]
    assert as_tuples(critical_path(spans)) == [
        ("root", 0, 10),
        ("p", 10, 30),
        ("c", 30, 50),
        ("root", 50, 100),
    ]


def test_a_child_starting_before_its_parent_counts_from_the_parents_start() -> None:
    spans = [
        span("root", None, 0, 100),
        span("p", "root", 20, 60),
        span("c", "p", 10, 40),
    ]
    assert as_tuples(critical_path(spans)) == [
        ("root", 0, 20),
        ("c", 20, 40),
        ("p", 40, 60),
        ("root", 60, 100),
    ]


def test_a_child_wholly_outside_its_parent_contributes_nothing_nor_do_its_children() -> None:
    spans = [
        span("root", None, 0, 100),
        span("p", "root", 20, 60),
        span("outside", "p", 70, 95),
        span("grandchild", "outside", 70, 95),
    ]
    assert as_tuples(critical_path(spans)) == [("root", 0, 20), ("p", 20, 60), ("root", 60, 100)]


def test_an_orphan_hangs_off_the_root_and_is_clipped_to_it() -> None:
    spans = [
        span("root", None, 0, 100),
        span("orphan", "never-arrived", 30, 130),
    ]
    path = critical_path(spans)
    assert path.root.span_id == "root"
    assert as_tuples(path) == [("root", 0, 30), ("orphan", 30, 100)]


def test_a_parentless_root_is_preferred_over_a_longer_orphan() -> None:
    spans = [span("orphan", "lost", -50, 200), span("root", None, 0, 100)]
    path = critical_path(spans)
    assert path.root.span_id == "root"
    assert as_tuples(path) == [("orphan", 0, 100)]


def test_among_several_parentless_spans_the_longest_then_earliest_is_the_root() -> None:
    spans = [
        span("b", None, 10, 60),
        span("a", None, 0, 50),
        span("c", None, 20, 30),
    ]
    path = critical_path(spans)
    assert path.root.span_id == "a"
    assert as_tuples(path) == [("a", 0, 10), ("b", 10, 50)]


def test_zero_duration_spans_leave_no_segments() -> None:
    spans = [
        span("root", None, 0, 100),
        span("a", "root", 0, 50),
        span("blip", "root", 50, 50),
        span("blip-at-end", "root", 100, 100),
    ]
    assert as_tuples(critical_path(spans)) == [("a", 0, 50), ("root", 50, 100)]


def test_a_zero_duration_root_has_an_empty_path() -> None:
    path = critical_path([span("root", None, 10, 10), span("a", "root", 0, 20)])
    assert path.e2e_ns == 0
    assert as_tuples(path) == []


def test_clock_skew_makes_spans_that_end_before_they_start_zero_length() -> None:
    spans = [span("root", None, 0, 100), span("skewed", "root", 80, 20)]
    assert as_tuples(critical_path(spans)) == [("root", 0, 100)]
    assert critical_path([span("root", None, 50, 10)]).e2e_ns == 0


def test_a_parent_cycle_neither_loops_nor_loses_the_window() -> None:
    spans = [span("a", "b", 0, 100), span("b", "a", 10, 40), span("self", "self", 50, 60)]
    path = critical_path(spans)
    assert path.root.span_id == "self"
    assert as_tuples(path) == [("self", 50, 60)]
    path = critical_path(spans[:2])
    assert path.root.span_id == "a"
    assert as_tuples(path) == [("a", 0, 10), ("b", 10, 40), ("a", 40, 100)]


def test_a_span_delivered_twice_counts_once() -> None:
    spans = [
        span("root", None, 0, 100),
        span("a", "root", 10, 40),
        span("a", "root", 10, 40),
    ]
    assert as_tuples(critical_path(spans)) == [("root", 0, 10), ("a", 10, 40), ("root", 40, 100)]


def test_an_empty_trace_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one span"):
        critical_path([])


def test_a_chain_of_twenty_thousand_spans_needs_no_recursion() -> None:
    depth = 20_000
    spans = [span(f"s{i}", f"s{i - 1}" if i else None, i, 2 * depth - i) for i in range(depth)]
    started = time.perf_counter()
    path = critical_path(reversed(spans))
    elapsed = time.perf_counter() - started
    segments = as_tuples(path)
    assert path.e2e_ns == 2 * depth
    assert len(segments) == 2 * depth - 1
    assert segments[0] == ("s0", 0, 1)
    assert segments[depth - 1] == (f"s{depth - 1}", depth - 1, depth + 1)
    assert segments[-1] == ("s0", 2 * depth - 1, 2 * depth)
    assert elapsed < 5


def test_a_wide_fan_out_walks_each_child_once() -> None:
    width = 20_000
    spans = [span("root", None, 0, width + 1)]
    spans += [span(f"c{i}", "root", 0, i + 1) for i in range(width)]
    assert as_tuples(critical_path(spans)) == [
        (f"c{width - 1}", 0, width),
        ("root", width, width + 1),
    ]
