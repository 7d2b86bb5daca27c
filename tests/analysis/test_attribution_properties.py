"""Invariants of attribution over random span trees, with skew, overruns, orphans and cycles."""

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from apps.analysis.attribution import TraceAttribution, attribute_trace
from apps.analysis.critical_path import find_root
from apps.analysis.spans import Span
from apps.analysis.stage_matching import (
    AFTER_FIRST_TOKEN,
    REGEX,
    UNTIL_FIRST_TOKEN,
    RuleSpec,
    StageMatcher,
    StageSpec,
)
from tests.builders.spans import span

NAMES = ("chat", "retrieve", "embed", "tool.call", "plan", "other")
SPECS = [
    StageSpec("plan", [RuleSpec(span_name="plan")]),
    StageSpec("retrieval", [RuleSpec(span_name="retr", name_match=REGEX)]),
    StageSpec("ttft", [RuleSpec(span_name="chat", portion=UNTIL_FIRST_TOKEN)]),
    StageSpec(
        "generation",
        [
            RuleSpec(span_name="chat", portion=AFTER_FIRST_TOKEN),
            RuleSpec(attributes={"llm": True}, portion=AFTER_FIRST_TOKEN),
        ],
    ),
    StageSpec("tools", [RuleSpec(span_name="tool.*", service="tools")]),
]
# Shared on purpose: its match cache carries over from one example to the next.
MATCHER = StageMatcher(SPECS)


@st.composite
def traces(draw: st.DrawFn) -> list[Span]:
    count = draw(st.integers(min_value=1, max_value=25))
    ids = [f"s{i}" for i in range(count)]
    spans: list[Span] = []
    for i, span_id in enumerate(ids):
        if i == 0:
            parent = None
        else:
            # Mostly earlier spans (a tree), sometimes a missing parent, no parent,
            # or any span at all, which can close a cycle.
            parent = draw(
                st.one_of(
                    st.sampled_from(ids[:i]),
                    st.sampled_from(ids[:i]),
                    st.just("missing"),
                    st.none(),
                    st.sampled_from(ids),
                )
            )
        start = draw(st.integers(min_value=0, max_value=60))
        length = draw(st.integers(min_value=-5, max_value=60))
        attributes: dict[str, Any] = {}
        if draw(st.booleans()):
            attributes["llm"] = draw(st.sampled_from([True, "true", 1]))
        if draw(st.integers(0, 3)) == 0:
            attributes["gen_ai.response.time_to_first_chunk"] = (
                draw(st.integers(min_value=-5, max_value=70)) * 1e-9
            )
        events = tuple(
            ("first_token", draw(st.integers(min_value=-10, max_value=130)))
            for _ in range(draw(st.integers(0, 2)))
        )
        spans.append(
            span(
                span_id,
                parent,
                start,
                start + length,
                name=draw(st.sampled_from(NAMES)),
                service=draw(st.sampled_from(("api", "tools"))),
                attributes=attributes,
                events=events,
                status="error" if draw(st.integers(0, 9)) == 0 else "unset",
            )
        )
    return spans


def clipped_window(span_id: str, spans: list[Span]) -> tuple[int, int]:
    """The span's window cut down by every ancestor up to the root, computed upwards."""
    by_id = {s.span_id: s for s in spans}
    root = find_root(by_id)
    lo, hi = by_id[span_id].start_ns, by_id[span_id].stop_ns
    current = by_id[span_id]
    for _ in range(len(spans) + 1):
        if current.span_id == root.span_id:
            return lo, hi
        parent = current.parent_id
        if parent is None or parent == current.span_id or parent not in by_id:
            parent = root.span_id
        current = by_id[parent]
        lo, hi = max(lo, current.start_ns), min(hi, current.stop_ns)
    raise AssertionError(f"{span_id} is on the path but does not reach the root")


def check_invariants(spans: list[Span], result: TraceAttribution) -> None:
    root = find_root({s.span_id: s for s in spans})
    assert result.e2e_ns == root.stop_ns - root.start_ns
    critical = sum(stage.critical_ns for stage in result.stages.values())
    assert critical + result.untracked_critical_ns == result.e2e_ns

    cursor = root.start_ns
    for segment in result.segments:
        assert segment.start_ns == cursor
        assert segment.end_ns > segment.start_ns
        lo, hi = clipped_window(segment.span_id, spans)
        assert lo <= segment.start_ns
        assert segment.end_ns <= hi
        cursor = segment.end_ns
    assert cursor == (root.stop_ns if result.segments else root.start_ns)

    for stage in result.stages.values():
        assert 0 <= stage.critical_ns <= stage.wall_ns
        assert stage.span_count >= 1
    assert result.error == any(s.status_error for s in spans)


@settings(max_examples=200, deadline=None)
@given(traces())
def test_stage_times_and_untracked_add_up_to_the_end_to_end_time(spans: list[Span]) -> None:
    check_invariants(spans, attribute_trace(spans, MATCHER))


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_the_result_does_not_depend_on_span_order(data: st.DataObject) -> None:
    spans = data.draw(traces())
    shuffled = data.draw(st.permutations(spans))
    assert attribute_trace(shuffled, MATCHER) == attribute_trace(spans, MATCHER)


@settings(max_examples=100, deadline=None)
@given(traces())
def test_a_warm_matcher_decides_like_a_fresh_one(spans: list[Span]) -> None:
    for one in spans:
        assert MATCHER.match(one) == StageMatcher(SPECS).match(one)
