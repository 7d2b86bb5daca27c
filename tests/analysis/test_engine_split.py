"""An LLM span taken apart by a serving engine's timings: gateway, queue, prefill, decode.

The spans carry the attributes vLLM's tracing sets (seconds); the parts are laid out
backwards from the first token, and the critical path, inheritance, reasons and the
what-if replay all see the same parts.
"""

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apps.analysis.attribution import attribute_trace
from apps.analysis.engine_timing import (
    ENGINE_FIRST_TOKEN,
    TIME_IN_DECODE,
    TIME_IN_PREFILL,
    TIME_IN_QUEUE,
)
from apps.analysis.spans import Span
from apps.analysis.stage_matching import (
    AFTER_FIRST_TOKEN,
    DECODE,
    GATEWAY,
    PREFILL,
    QUEUE,
    UNTIL_FIRST_TOKEN,
    WHOLE,
    RuleSpec,
    StageMatcher,
    StageSpec,
)
from apps.analysis.stage_reasons import RULE, stage_reason
from tests.builders.spans import T0, span
from tests.timing import MS
from tests.whatif.models import assert_replay_reproduces_analysis

LLM = "llm_request"


def engine(queue_ms: float, prefill_ms: float, decode_ms: float = 0.0, **extra: Any) -> dict:
    return {
        TIME_IN_QUEUE: queue_ms / 1000,
        TIME_IN_PREFILL: prefill_ms / 1000,
        TIME_IN_DECODE: decode_ms / 1000,
        **extra,
    }


def split_matcher(*, with_engine: bool = True, first: tuple[str, ...] = ()) -> StageMatcher:
    """gateway, queue, prefill and decode stages before ttft and generation, all on the
    LLM spans; ``first``: stages put ahead of them all."""
    portions = [("gateway", GATEWAY), ("queue", QUEUE), ("prefill", PREFILL), ("decode", DECODE)]
    if not with_engine:
        portions = []
    portions += [("ttft", UNTIL_FIRST_TOKEN), ("generation", AFTER_FIRST_TOKEN)]
    specs = [StageSpec(slug, [RuleSpec(span_name="llm*")], n) for n, slug in enumerate(first)]
    specs += [
        StageSpec(slug, [RuleSpec(span_name="llm*", portion=portion)], 10 + position)
        for position, (slug, portion) in enumerate(portions)
    ]
    specs.append(StageSpec("tool", [RuleSpec(span_name="tool*")], 50))
    return StageMatcher(specs)


def ms(start: float, end: float, stage: str | None) -> tuple[int, int, str | None]:
    return (T0 + round(start * MS), T0 + round(end * MS), stage)


def llm(start_ms: float, end_ms: float, attributes: dict, **fields: Any) -> Span:
    return span(
        2,
        1,
        T0 + round(start_ms * MS),
        T0 + round(end_ms * MS),
        name=fields.pop("name", LLM),
        attributes=attributes,
        **fields,
    )


def test_the_engines_span_splits_into_queue_prefill_and_decode() -> None:
    # Arrival at 0; 40 ms queued, 110 ms prefill, the engine's first token at 150 ms.
    spanned = llm(0, 900, engine(40, 110, 750, **{ENGINE_FIRST_TOKEN: 0.150}))
    match = split_matcher().match(spanned)
    assert match.parts(spanned) == [
        ms(0, 0, "gateway"),
        ms(0, 40, "queue"),
        ms(40, 150, "prefill"),
        ms(150, 900, "decode"),
    ]
    assert match.stages() == ("gateway", "queue", "prefill", "decode")


def test_the_engines_own_first_token_past_queue_and_prefill_leaves_a_gateway_part() -> None:
    # 12 ms of the engine's scheduling that is neither queue nor prefill.
    spanned = llm(0, 500, engine(40, 110, **{ENGINE_FIRST_TOKEN: 0.162}))
    assert split_matcher().match(spanned).parts(spanned)[:3] == [
        ms(0, 12, "gateway"),
        ms(12, 52, "queue"),
        ms(52, 162, "prefill"),
    ]


def test_a_clients_later_first_token_puts_the_difference_in_network_and_gateway() -> None:
    # The client saw its first token at 230 ms; the engine took 40 + 110 of it.
    spanned = llm(0, 800, engine(40, 110), events=[("first_token", T0 + 230 * MS)])
    assert split_matcher().match(spanned).parts(spanned) == [
        ms(0, 80, "gateway"),
        ms(80, 120, "queue"),
        ms(120, 230, "prefill"),
        ms(230, 800, "decode"),
    ]


def test_engine_times_longer_than_the_wait_the_client_saw_are_clamped_to_the_span() -> None:
    spanned = llm(0, 400, engine(300, 200), events=[("first_token", T0 + 250 * MS)])
    assert split_matcher().match(spanned).parts(spanned)[:3] == [
        ms(0, 0, "gateway"),
        ms(0, 50, "queue"),
        ms(50, 250, "prefill"),
    ]


def test_without_engine_timings_the_engines_portions_take_nothing() -> None:
    spanned = llm(0, 600, {}, events=[("first_token", T0 + 200 * MS)])
    assert split_matcher().match(spanned).parts(spanned) == [
        ms(0, 200, "ttft"),
        ms(200, 600, "generation"),
    ]


@pytest.mark.parametrize(
    "value", ["soon", None, True, [1], {"s": 1}, float("nan"), 1e300, -1e300, "1e400"]
)
def test_unusable_engine_timings_leave_the_plain_split(value: Any) -> None:
    attributes = {TIME_IN_QUEUE: value, TIME_IN_PREFILL: value}
    spanned = llm(0, 600, attributes, events=[("first_token", T0 + 200 * MS)])
    assert split_matcher().match(spanned).parts(spanned) == [
        ms(0, 200, "ttft"),
        ms(200, 600, "generation"),
    ]


def test_rules_without_engine_portions_keep_their_split_and_need_no_engine_read() -> None:
    spanned = llm(0, 600, engine(40, 110), events=[("first_token", T0 + 200 * MS)])
    match = split_matcher(with_engine=False).match(spanned)
    assert match.engine is None
    assert match.parts(spanned) == [ms(0, 200, "ttft"), ms(200, 600, "generation")]


def test_an_earlier_whole_rule_takes_every_part() -> None:
    spanned = llm(0, 600, engine(40, 110), events=[("first_token", T0 + 200 * MS)])
    match = split_matcher(first=("model",)).match(spanned)
    assert match.engine is None
    assert match.stages() == ("model",)


def test_the_engines_first_token_splits_a_span_whose_client_recorded_none() -> None:
    # No first-token event: until_first_token and after_first_token rules split at the
    # engine's own first token (queue plus prefill without ENGINE_FIRST_TOKEN).
    spanned = llm(0, 600, engine(40, 110))
    match = split_matcher(with_engine=False).match(spanned)
    assert match.parts(spanned) == [ms(0, 150, "ttft"), ms(150, 600, "generation")]


def trace_with_child() -> list[Span]:
    """Root 0-1000 ms; an LLM client span 100-900 with the engine's timings and its first
    token at 400 ms; under it an HTTP span 120-880 that no rule takes."""
    return [
        span(1, None, T0, T0 + 1000 * MS, name="POST /chat"),
        llm(100, 900, engine(60, 140), name="llm chat", events=[("first_token", T0 + 400 * MS)]),
        span(3, 2, T0 + 120 * MS, T0 + 880 * MS, name="POST /v1/chat/completions"),
    ]


def test_critical_path_shares_of_the_parts_sum_to_the_whole_llm_stage() -> None:
    spans = trace_with_child()
    split = attribute_trace(spans, split_matcher())
    whole = attribute_trace(spans, StageMatcher([StageSpec("llm", [RuleSpec(span_name="llm*")])]))
    parts = {slug: result.critical_ns for slug, result in split.stages.items()}
    # Gateway 100-200, queue 200-260, prefill 260-400, decode 400-900.
    assert parts == {
        "gateway": 100 * MS,
        "queue": 60 * MS,
        "prefill": 140 * MS,
        "decode": 500 * MS,
    }
    assert sum(parts.values()) == whole.stages["llm"].critical_ns == 800 * MS
    assert split.untracked_critical_ns + sum(parts.values()) == split.e2e_ns


def test_a_child_no_rule_takes_inherits_the_engines_cuts() -> None:
    spans = trace_with_child()
    result = attribute_trace(spans, split_matcher())
    child = result.matches["0000000000000003"]
    assert child.inherited_from == "0000000000000002"
    assert child.parts(spans[2]) == [
        ms(120, 200, "gateway"),
        ms(200, 260, "queue"),
        ms(260, 400, "prefill"),
        ms(400, 880, "decode"),
    ]


def test_a_child_within_one_part_inherits_that_part_whole() -> None:
    spans = [*trace_with_child()[:2], span(3, 2, T0 + 210 * MS, T0 + 250 * MS, name="db")]
    match = attribute_trace(spans, split_matcher()).matches["0000000000000003"]
    assert (match.first_token_ns, match.stages()) == (None, ("queue",))


def test_the_reason_names_each_parts_rule() -> None:
    spanned = llm(0, 600, engine(40, 110), events=[("first_token", T0 + 200 * MS)])
    matcher = split_matcher()
    match = matcher.match(spanned)
    labels = tuple(_label(index) for index in range(len(matcher.rules)))
    reason = stage_reason(spanned, match, matcher=matcher, labels=labels, by_id={}, matches={})
    assert reason.kind == RULE
    assert reason.stages == ("gateway", "queue", "prefill", "decode")
    assert [label.stage for label in reason.rules] == ["gateway", "queue", "prefill", "decode"]
    names = {"gateway": "Network and gateway", "queue": "Queue", "prefill": "Prefill"}
    assert reason.stage_words(names | {"decode": "Decode"}) == (
        "Network and gateway, then Queue, then Prefill, then Decode"
    )


def _label(index: int) -> Any:
    from apps.analysis.stage_reasons import RuleLabel

    stages = ["gateway", "queue", "prefill", "decode", "ttft", "generation", "tool"]
    return RuleLabel(index + 1, stages[index] if index < len(stages) else None, 1, "llm*")


# The replay: without changes it must give back the analysis, parts and all.
NAMES = ("tool", "llm chat", "server")


@st.composite
def engine_traces(draw: st.DrawFn) -> list[Span]:
    """A root, spans under it and under each other, and LLM leaves that carry an engine's
    timings (some with a client's first token, some without, some unusable)."""
    root_ms = draw(st.integers(1, 2000))
    spans: list[Span] = [span(1, None, T0, T0 + root_ms * MS, name="server")]
    windows = [(0, root_ms)]
    parents = [0]
    for index in range(draw(st.integers(0, 10))):
        parent = draw(st.sampled_from(parents))
        low, high = windows[parent]
        start = draw(st.integers(low - 5, high))
        end = draw(st.integers(start, high + 20))
        attributes: dict = {}
        events = []
        name = draw(st.sampled_from((*NAMES, LLM)))
        if name == LLM:
            attributes = engine(
                draw(st.floats(0, 400)), draw(st.floats(0, 400)), draw(st.floats(0, 400))
            )
            if draw(st.booleans()):
                attributes[ENGINE_FIRST_TOKEN] = draw(st.floats(0, 1))
            if draw(st.booleans()):
                events = [("first_token", T0 + draw(st.integers(start, end)) * MS)]
        elif name == "llm chat" and draw(st.booleans()):
            events = [("first_token", T0 + draw(st.integers(start, end)) * MS)]
        spans.append(
            span(
                index + 2,
                parent + 1,
                T0 + start * MS,
                T0 + end * MS,
                name=name,
                attributes=attributes,
                events=events,
            )
        )
        windows.append((start, end))
        if name != LLM:  # the engine's spans stay leaves
            parents.append(len(spans) - 1)
    return spans


@settings(max_examples=200, deadline=None)
@given(st.lists(engine_traces(), min_size=1, max_size=4))
def test_a_replay_without_changes_reproduces_the_engines_parts(batch: list[list[Span]]) -> None:
    assert_replay_reproduces_analysis(batch, split_matcher())


def test_whole_portion_is_still_the_default() -> None:
    assert RuleSpec().portion == WHOLE
