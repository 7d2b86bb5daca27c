import pytest

from apps.analysis.attribution import ChargedSegment, StageResult, attribute_trace, union_ns
from apps.analysis.stage_matching import (
    AFTER_FIRST_TOKEN,
    UNTIL_FIRST_TOKEN,
    RuleSpec,
    StageMatcher,
    StageSpec,
)
from tests.builders.spans import span
from tests.timing import MS

KIND = "openinference.span.kind"
TTFC = "gen_ai.response.time_to_first_chunk"

RAG_STAGES = [
    StageSpec("retrieval", [RuleSpec(attributes={KIND: "RETRIEVER"})]),
    StageSpec("ttft", [RuleSpec(attributes={KIND: "LLM"}, portion=UNTIL_FIRST_TOKEN)]),
    StageSpec("generation", [RuleSpec(attributes={KIND: "LLM"}, portion=AFTER_FIRST_TOKEN)]),
    StageSpec("rerank", [RuleSpec(attributes={KIND: "RERANKER"})]),
]
RAG = StageMatcher(RAG_STAGES)


def test_a_rag_trace_is_charged_stage_by_stage() -> None:
    spans = [
        span("root", None, 0, 1000 * MS, name="chat"),
        span("r", "root", 50 * MS, 250 * MS, attributes={KIND: "RETRIEVER"}),
        span("llm", "root", 300 * MS, 950 * MS, attributes={KIND: "LLM", TTFC: 0.2}),
    ]
    result = attribute_trace(spans, RAG)
    assert result.root_span_id == "root"
    assert result.e2e_ns == 1000 * MS
    assert result.error is False
    assert result.stages == {
        "retrieval": StageResult(wall_ns=200 * MS, span_count=1, error=False, critical_ns=200 * MS),
        "ttft": StageResult(wall_ns=200 * MS, span_count=1, error=False, critical_ns=200 * MS),
        "generation": StageResult(
            wall_ns=450 * MS, span_count=1, error=False, critical_ns=450 * MS
        ),
    }
    assert result.untracked_critical_ns == 150 * MS
    assert result.segments == (
        ChargedSegment("root", 0, 50 * MS, None),
        ChargedSegment("r", 50 * MS, 250 * MS, "retrieval"),
        ChargedSegment("root", 250 * MS, 300 * MS, None),
        ChargedSegment("llm", 300 * MS, 500 * MS, "ttft"),
        ChargedSegment("llm", 500 * MS, 950 * MS, "generation"),
        ChargedSegment("root", 950 * MS, 1000 * MS, None),
    )


def test_a_segment_that_starts_after_the_first_token_goes_to_the_after_part() -> None:
    spans = [
        span("root", None, 0, 100),
        span("llm", "root", 0, 100, attributes={KIND: "LLM"}, events=(("first_token", 30),)),
        span("tool", "llm", 10, 60),
    ]
    # The tool span is in no stage on purpose, so that its time is not the LLM's.
    result = attribute_trace(spans, StageMatcher(RAG_STAGES, [RuleSpec(span_name="tool")]))
    assert result.segments == (
        ChargedSegment("llm", 0, 10, "ttft"),
        ChargedSegment("tool", 10, 60, None),
        ChargedSegment("llm", 60, 100, "generation"),
    )
    assert result.stages["ttft"].critical_ns == 10
    assert result.stages["ttft"].wall_ns == 30
    assert result.stages["generation"].critical_ns == 40
    assert result.untracked_critical_ns == 50


def test_parallel_retrievals_count_their_union_as_wall_time_and_the_last_on_the_path() -> None:
    spans = [
        span("root", None, 0, 200),
        span("a", "root", 0, 100, attributes={KIND: "RETRIEVER"}),
        span("b", "root", 50, 150, attributes={KIND: "RETRIEVER"}, status="error"),
    ]
    result = attribute_trace(spans, RAG)
    assert result.stages == {
        "retrieval": StageResult(wall_ns=150, span_count=2, error=True, critical_ns=100)
    }
    assert result.untracked_critical_ns == 100
    assert result.error is True


def test_wall_time_is_measured_not_clipped_to_the_root() -> None:
    spans = [
        span("root", None, 0, 100),
        span("late", "root", 50, 400, attributes={KIND: "RERANKER"}),
    ]
    result = attribute_trace(spans, RAG)
    assert result.stages["rerank"] == StageResult(
        wall_ns=350, span_count=1, error=False, critical_ns=50
    )
    assert result.untracked_critical_ns == 50


def test_stages_without_spans_are_left_out_and_the_rest_keep_stage_order() -> None:
    spans = [
        span("root", None, 0, 100),
        span("rr", "root", 60, 90, attributes={KIND: "RERANKER"}),
        span("r", "root", 10, 50, attributes={KIND: "RETRIEVER"}),
    ]
    assert list(attribute_trace(spans, RAG).stages) == ["retrieval", "rerank"]


def test_a_zero_length_first_token_part_still_counts_the_span() -> None:
    spans = [span("root", None, 0, 100, attributes={KIND: "LLM", TTFC: 0})]
    result = attribute_trace(spans, RAG)
    assert result.stages["ttft"] == StageResult(wall_ns=0, span_count=1, error=False, critical_ns=0)
    assert result.stages["generation"].critical_ns == 100
    assert result.segments == (ChargedSegment("root", 0, 100, "generation"),)


def test_the_root_span_can_belong_to_a_stage() -> None:
    matcher = StageMatcher([StageSpec("api", [RuleSpec(span_name="root")])])
    result = attribute_trace([span("root", None, 0, 100, status="error")], matcher)
    assert result.stages == {"api": StageResult(100, 1, True, 100)}
    assert result.untracked_critical_ns == 0
    assert result.error is True


def test_a_trace_with_no_spans_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one span"):
        attribute_trace([], RAG)


@pytest.mark.parametrize(
    ("intervals", "total"),
    [
        ([], 0),
        ([(0, 10)], 10),
        ([(0, 10), (10, 20)], 20),
        ([(5, 15), (0, 10)], 15),
        ([(0, 100), (10, 20), (30, 40)], 100),
        ([(0, 10), (20, 30), (25, 40)], 30),
        ([(5, 5), (0, 0)], 0),
    ],
)
def test_union_counts_overlapping_time_once(intervals: list[tuple[int, int]], total: int) -> None:
    assert union_ns(intervals) == total
