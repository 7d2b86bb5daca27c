"""Spans no rule takes count in the stage of their nearest ancestor that one took."""

import itertools

from hypothesis import given, settings

from apps.analysis.attribution import ChargedSegment, StageResult, attribute_trace
from apps.analysis.critical_path import find_root
from apps.analysis.spans import Span
from apps.analysis.stage_matching import (
    AFTER_FIRST_TOKEN,
    UNTIL_FIRST_TOKEN,
    RuleSpec,
    StageMatcher,
    StageSpec,
)
from tests.analysis.test_attribution_properties import SPECS, check_invariants, traces
from tests.builders.spans import span
from tests.timing import MS

OPERATION = "gen_ai.operation.name"
TTFC = "gen_ai.response.time_to_first_chunk"

# Rules for the application's own spans only, as a newcomer writes them.
APP = StageMatcher(
    [
        StageSpec("retrieval", [RuleSpec(span_name="retrieval")], 0),
        StageSpec("rerank", [RuleSpec(span_name="rerank")], 1),
        StageSpec("ttft", [RuleSpec(attributes={OPERATION: "chat"}, portion=UNTIL_FIRST_TOKEN)], 2),
        StageSpec(
            "generation", [RuleSpec(attributes={OPERATION: "chat"}, portion=AFTER_FIRST_TOKEN)], 3
        ),
    ]
)


def ordinary_app() -> list[Span]:
    """``POST /ask`` of an ordinary app: its own spans, and the instrumented calls inside."""
    return [
        span("ask", None, 0, 1000 * MS, name="POST /ask", kind="server"),
        span("retrieval", "ask", 20 * MS, 190 * MS, name="retrieval"),
        span("embed", "retrieval", 25 * MS, 40 * MS, name="POST /v1/embeddings", kind="client"),
        span("query", "retrieval", 40 * MS, 185 * MS, name="query docs", kind="client"),
        span("rerank", "ask", 200 * MS, 320 * MS, name="rerank"),
        span("http", "rerank", 205 * MS, 315 * MS, name="POST /v1/rerank", kind="client"),
        span(
            "chat",
            "ask",
            330 * MS,
            980 * MS,
            name="chat gpt-4o-mini",
            attributes={OPERATION: "chat", TTFC: 0.25},
        ),
        # The HTTP client span of the streamed call: waiting for the first token, then reading.
        span("stream", "chat", 332 * MS, 978 * MS, name="POST /v1/chat/completions", kind="client"),
    ]


def test_the_calls_inside_a_stage_span_count_in_that_stage() -> None:
    result = attribute_trace(ordinary_app(), APP)
    assert result.stages == {
        "retrieval": StageResult(wall_ns=170 * MS, span_count=3, error=False, critical_ns=170 * MS),
        "rerank": StageResult(wall_ns=120 * MS, span_count=2, error=False, critical_ns=120 * MS),
        "ttft": StageResult(wall_ns=250 * MS, span_count=2, error=False, critical_ns=250 * MS),
        "generation": StageResult(
            wall_ns=400 * MS, span_count=2, error=False, critical_ns=400 * MS
        ),
    }
    # Only the time under no stage span: the server's own 20 + 10 + 10 + 20 ms.
    assert result.untracked_critical_ns == 60 * MS
    assert sum(s.critical_ns for s in result.stages.values()) + 60 * MS == result.e2e_ns
    # The streamed call's HTTP span is split at the chat span's first token.
    assert [s for s in result.segments if s.span_id == "stream"] == [
        ChargedSegment("stream", 332 * MS, 580 * MS, "ttft"),
        ChargedSegment("stream", 580 * MS, 978 * MS, "generation"),
    ]
    assert [s for s in result.segments if s.span_id == "query"] == [
        ChargedSegment("query", 40 * MS, 185 * MS, "retrieval")
    ]


def test_each_span_says_why_it_is_in_its_stage() -> None:
    matches = attribute_trace(ordinary_app(), APP).matches
    assert matches["retrieval"].rule == 0
    assert matches["retrieval"].inherited_from is None
    assert matches["query"].rule is None
    assert matches["query"].inherited_from == "retrieval"
    assert matches["stream"].inherited_from == "chat"
    assert matches["ask"].rule is None
    assert matches["ask"].inherited_from is None
    assert APP.rules[matches["chat"].rule or 0].stage == "ttft"


def test_a_span_with_its_own_rule_keeps_its_stage_inside_another_stage() -> None:
    spans = [
        span("root", None, 0, 100),
        span("retrieval", "root", 0, 100, name="retrieval"),
        span("nested", "retrieval", 10, 90, name="rerank"),
        span("deep", "nested", 20, 80, name="SELECT"),
    ]
    result = attribute_trace(spans, APP)
    assert result.stages["retrieval"].critical_ns == 20
    assert result.stages["rerank"].critical_ns == 80
    assert result.matches["deep"].inherited_from == "nested"


def test_a_no_stage_rule_keeps_a_span_and_what_it_holds_untracked() -> None:
    matcher = StageMatcher(
        [StageSpec("retrieval", [RuleSpec(span_name="retrieval")])],
        [RuleSpec(span_name="cache flush")],
    )
    spans = [
        span("root", None, 0, 100),
        span("retrieval", "root", 0, 100, name="retrieval"),
        span("flush", "retrieval", 10, 60, name="cache flush"),
        span("write", "flush", 20, 50, name="SET"),
        span("again", "flush", 50, 55, name="retrieval"),
    ]
    result = attribute_trace(spans, matcher)
    assert result.matches["flush"].no_stage
    assert result.matches["write"].inherited_from == "flush"
    assert result.stages["retrieval"].critical_ns == 50 + 5
    assert result.untracked_critical_ns == 45
    assert matcher.is_no_stage_rule(result.matches["flush"].rule or 0)


def test_a_stage_rule_wins_over_a_no_stage_rule() -> None:
    matcher = StageMatcher(
        [StageSpec("retrieval", [RuleSpec(span_name="retrieval")])],
        [RuleSpec(span_name="retrieval")],
    )
    result = attribute_trace([span("root", None, 0, 10, name="retrieval")], matcher)
    assert result.stages["retrieval"].critical_ns == 10


def test_an_orphan_hangs_off_the_root_and_takes_its_stage() -> None:
    spans = [
        span("root", None, 0, 100, name="retrieval"),
        span("orphan", "missing", 10, 40, name="SELECT"),
    ]
    result = attribute_trace(spans, APP)
    assert result.matches["orphan"].inherited_from == "root"
    assert result.stages["retrieval"].critical_ns == 100


def test_an_unmatched_parent_passes_on_its_ancestors_stage() -> None:
    spans = [
        span("root", None, 0, 100),
        span("retrieval", "root", 0, 100, name="retrieval"),
        span("client", "retrieval", 5, 95, name="vector search"),
        span("http", "client", 10, 90, name="POST /points/search"),
    ]
    result = attribute_trace(spans, APP)
    assert result.matches["http"].inherited_from == "retrieval"
    assert result.stages["retrieval"].critical_ns == 100
    assert result.untracked_critical_ns == 0


def _charges_by_walking_up(spans: list[Span], matcher: StageMatcher) -> dict[str | None, int]:
    """Exact computation: each critical-path segment goes to the stage of the nearest span
    at or above its own that a rule takes, split at that span's first token."""
    by_id = {s.span_id: s for s in spans}
    root = find_root(by_id)
    result = attribute_trace(spans, matcher)
    totals: dict[str | None, int] = {}
    for segment in result.segments:
        current = by_id[segment.span_id]
        while True:
            own = matcher.match(current)
            if own.decided or current.span_id == root.span_id:
                break
            parent = current.parent_id
            if parent is None or parent == current.span_id or parent not in by_id:
                parent = root.span_id
            current = by_id[parent]
        token = own.first_token_ns
        cuts = [segment.start_ns, segment.end_ns]
        if token is not None and segment.start_ns < token < segment.end_ns:
            cuts.insert(1, token)
        for start, end in itertools.pairwise(cuts):
            stage = own.stage_at(start)
            totals[stage] = totals.get(stage, 0) + end - start
    return totals


@settings(max_examples=300, deadline=None)
@given(traces())
def test_inherited_critical_path_time_equals_exact_computation(spans: list[Span]) -> None:
    matcher = StageMatcher(SPECS, [RuleSpec(span_name="other", service="tools")])
    result = attribute_trace(spans, matcher)
    check_invariants(spans, result)
    expected = _charges_by_walking_up(spans, matcher)
    got: dict[str | None, int] = {
        slug: stage.critical_ns for slug, stage in result.stages.items() if stage.critical_ns
    }
    if result.untracked_critical_ns:
        got[None] = result.untracked_critical_ns
    assert got == {stage: ns for stage, ns in expected.items() if ns}
