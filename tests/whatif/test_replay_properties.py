"""Properties of the replay on random traces: what must hold whatever the trace's shape."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from apps.analysis.spans import Span
from apps.whatif.changes import Change
from tests.builders.spans import T0, span
from tests.timing import MS
from tests.whatif.models import assert_replay_reproduces_analysis, by_name, model_of, replayed

STAGES = ("a", "b", "c")
MATCHER = by_name(*STAGES, split=("ttft", "gen"))
NAMES = ("a", "b", "c", "untracked", "llm chat")


@st.composite
def traces(draw: st.DrawFn) -> list[Span]:
    """A root and up to 12 spans, each under an earlier one; most lie within their parent,
    some start before it or outlive it, some last zero; LLM spans may have a first token."""
    root_ms = draw(st.integers(1, 2000))
    spans: list[Span] = [span(1, None, T0, T0 + root_ms * MS, name="server")]
    windows = [(0, root_ms)]
    for index in range(draw(st.integers(0, 12))):
        parent = draw(st.integers(0, len(spans) - 1))
        low, high = windows[parent]
        start = draw(st.integers(low - 5, high))
        end = draw(st.integers(start, high + 20))
        name = draw(st.sampled_from(NAMES))
        events = []
        if name.startswith("llm") and draw(st.booleans()):
            events = [("first_token", T0 + draw(st.integers(start, end)) * MS)]
        spans.append(
            span(index + 2, parent + 1, T0 + start * MS, T0 + end * MS, name=name, events=events)
        )
        windows.append((start, end))
    return spans


changes = st.one_of(
    st.builds(lambda s, f: Change(s, "scale", factor=f), st.sampled_from(STAGES), st.floats(0, 1)),
    st.builds(lambda s, m: Change(s, "shift", ms=m), st.sampled_from(STAGES), st.floats(-500, 0)),
    st.builds(lambda s: Change(s, "remove"), st.sampled_from((*STAGES, "ttft", "gen"))),
    st.builds(
        lambda s, m: Change(s, "cap", ms=m), st.sampled_from((*STAGES, "ttft")), st.floats(1, 500)
    ),
    st.builds(
        lambda s, r, h: Change(s, "cache", hit_ratio=r, hit_ms=h),
        st.sampled_from(STAGES),
        st.floats(0, 1),
        st.just(0.0),
    ),
    st.builds(
        lambda s, o: Change(s, "parallel", with_stage=o),
        st.sampled_from(STAGES),
        st.sampled_from(STAGES),
    ),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(traces(), min_size=1, max_size=4))
def test_a_replay_without_changes_reproduces_the_analysis_of_each_trace(
    batch: list[list[Span]],
) -> None:
    assert_replay_reproduces_analysis(batch, MATCHER)


@settings(max_examples=300, deadline=None)
@given(st.lists(traces(), min_size=1, max_size=4), st.lists(changes, min_size=1, max_size=3))
def test_shortening_removing_capping_or_parallelizing_never_makes_a_trace_longer(
    batch: list[list[Span]], chosen: list[Change]
) -> None:
    model = model_of(batch, MATCHER)
    before = replayed(model).e2e_ns
    after = replayed(model, *chosen)
    assert np.all(after.e2e_ns <= before + 1e-6)
    # Every nanosecond of the new end-to-end time is still charged to a stage or untracked.
    assert np.allclose(after.critical_ns.sum(axis=1), after.e2e_ns, atol=1e-3)


@settings(max_examples=200, deadline=None)
@given(st.lists(traces(), min_size=1, max_size=4), st.sampled_from((*STAGES, "ttft", "gen")))
def test_scaling_by_one_changes_nothing(batch: list[list[Span]], stage: str) -> None:
    model = model_of(batch, MATCHER)
    before = replayed(model)
    after = replayed(model, Change(stage, "scale", factor=1.0))
    assert np.array_equal(after.node_time, before.node_time)
    assert np.array_equal(after.critical_ns, before.critical_ns)


@settings(max_examples=200, deadline=None)
@given(st.lists(traces(), min_size=1, max_size=4), st.sampled_from(STAGES), st.floats(1, 3))
def test_slowing_a_stage_never_makes_a_trace_shorter(
    batch: list[list[Span]], stage: str, factor: float
) -> None:
    model = model_of(batch, MATCHER)
    before = replayed(model).e2e_ns
    assert np.all(replayed(model, Change(stage, "scale", factor=factor)).e2e_ns >= before - 1e-6)
