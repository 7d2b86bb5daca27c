"""Why a span counts where it does, in words: the deciding rule as the editor numbers it,
the span above it whose stage it inherited, a no-stage rule, or nothing."""

from apps.analysis.attribution import attribute_trace
from apps.analysis.stage_matching import (
    AFTER_FIRST_TOKEN,
    DECLARED_STAGE,
    UNTIL_FIRST_TOKEN,
    RuleSpec,
    StageMatcher,
    StageSpec,
)
from apps.analysis.stage_reasons import (
    DECLARED,
    INHERITED,
    NO_STAGE_RULE,
    RULE,
    UNTRACKED,
    RuleLabel,
    StageReason,
    stage_reason,
)
from tests.analysis.test_stage_inheritance import OPERATION, TTFC
from tests.builders.spans import span
from tests.timing import MS

NAMES = {"retrieval": "Retrieval", "ttft": "TTFT", "generation": "Generation"}
MATCHER = StageMatcher(
    [
        StageSpec("retrieval", [RuleSpec(span_name="vector*"), RuleSpec(span_name="retrieval")], 0),
        StageSpec("ttft", [RuleSpec(attributes={OPERATION: "chat"}, portion=UNTIL_FIRST_TOKEN)], 1),
        StageSpec(
            "generation",
            [
                RuleSpec(span_name="stream*", portion=AFTER_FIRST_TOKEN),
                RuleSpec(attributes={OPERATION: "chat"}, portion=AFTER_FIRST_TOKEN),
            ],
            2,
        ),
    ],
    [RuleSpec(span_name="cache flush")],
)
# In the matcher's order, numbered within their stage as the editor lists them.
LABELS = (
    RuleLabel(11, "retrieval", 1, "name = vector*"),
    RuleLabel(12, "retrieval", 2, "name = retrieval"),
    RuleLabel(21, "ttft", 1, f"{OPERATION}=chat, until first token"),
    RuleLabel(31, "generation", 1, "name = stream*, after first token"),
    RuleLabel(32, "generation", 2, f"{OPERATION}=chat, after first token"),
    RuleLabel(41, None, 1, "name = cache flush"),
)
SPANS = [
    span("ask", None, 0, 1000 * MS, name="POST /ask", kind="server"),
    span("retrieval", "ask", 20 * MS, 190 * MS, name="retrieval"),
    span("query", "retrieval", 40 * MS, 185 * MS, name="query docs", kind="client"),
    span("pool", "query", 41 * MS, 42 * MS, name="connect"),
    span("flush", "retrieval", 186 * MS, 189 * MS, name="cache flush"),
    span("redis", "flush", 186 * MS, 188 * MS, name="redis SET", kind="client"),
    span(
        "chat",
        "ask",
        330 * MS,
        980 * MS,
        name="chat gpt-4o-mini",
        attributes={OPERATION: "chat", TTFC: 0.25},
    ),
    span("stream", "chat", 332 * MS, 978 * MS, name="POST /v1/chat/completions"),
    span("late", "chat", 600 * MS, 700 * MS, name="tool lookup"),
    span("log", "ask", 985 * MS, 995 * MS, name="log write"),
]


def reasons() -> dict[str, StageReason]:
    by_id = {s.span_id: s for s in SPANS}
    matches = attribute_trace(SPANS, MATCHER).matches
    return {
        span_id: stage_reason(
            by_id[span_id],
            match,
            matcher=MATCHER,
            labels=LABELS,
            by_id=by_id,
            matches=matches,
        )
        for span_id, match in matches.items()
    }


def test_a_span_a_rule_took_names_the_rule_by_its_number_in_its_stage() -> None:
    reason = reasons()["retrieval"]
    assert (reason.kind, reason.stages, reason.rules) == (RULE, ("retrieval",), (LABELS[1],))
    assert reason.text(NAMES) == "Retrieval — rule 2: name = retrieval"
    assert reason.short() == "rule 2"


def test_a_span_split_at_its_first_token_names_both_rules() -> None:
    reason = reasons()["chat"]
    assert reason.stages == ("ttft", "generation")
    assert reason.rules == (LABELS[2], LABELS[4])
    assert reason.text(NAMES) == (
        "TTFT until the first token, then Generation — "
        f"TTFT rule 1: {OPERATION}=chat, until first token; "
        f"Generation rule 2: {OPERATION}=chat, after first token"
    )
    assert reason.short() == "rules"


def test_a_span_below_a_stage_span_names_the_ancestor_a_rule_took() -> None:
    found = reasons()
    assert found["query"].kind == INHERITED
    assert found["query"].text(NAMES) == "Retrieval — inside `retrieval` (span retrieval)"
    # Two levels down, still the span a rule took, not the parent.
    assert found["pool"].ancestor_id == "retrieval"
    assert found["pool"].short() == "inherited"


def test_a_call_inside_an_llm_span_is_split_at_its_first_token_or_takes_one_side() -> None:
    found = reasons()
    assert found["stream"].text(NAMES) == (
        "TTFT until the first token, then Generation — inside `chat gpt-4o-mini` (span chat)"
    )
    assert found["late"].stages == ("generation",)  # it starts after the first token


def test_a_no_stage_rule_and_what_it_holds() -> None:
    found = reasons()
    assert found["flush"].kind == NO_STAGE_RULE
    assert found["flush"].stage is None
    assert found["flush"].text(NAMES) == "no stage — no-stage rule 1: name = cache flush"
    assert found["redis"].kind == INHERITED
    assert found["redis"].text(NAMES) == (
        "untracked — inside `cache flush` (span flush), kept out of every stage by a no-stage rule"
    )


def test_a_span_with_no_rule_and_no_stage_above_it_is_untracked() -> None:
    found = reasons()
    for span_id in ("ask", "log"):
        assert found[span_id].kind == UNTRACKED
        assert found[span_id].text(NAMES) == "untracked — no rule, no stage above it"
        assert found[span_id].short() == "no rule"


def test_an_after_first_token_rule_alone_leaves_the_start_untracked() -> None:
    matcher = StageMatcher(
        [StageSpec("generation", [RuleSpec(span_name="chat*", portion=AFTER_FIRST_TOKEN)])]
    )
    labels = (RuleLabel(1, "generation", 1, "name = chat*, after first token"),)
    llm = span("llm", None, 0, 100 * MS, name="chat x", attributes={TTFC: 0.04})
    match = matcher.match(llm)
    reason = stage_reason(
        llm, match, matcher=matcher, labels=labels, by_id={"llm": llm}, matches={"llm": match}
    )
    assert reason.text(NAMES) == (
        "untracked until the first token, then Generation — rule 1: name = chat*, after first token"
    )


def test_a_span_that_names_its_stage_says_so_and_its_children_inherit_it() -> None:
    labels = (
        *LABELS,
        *(RuleLabel(0, slug, 0, f"{DECLARED_STAGE} = {slug}") for slug in NAMES),
    )
    spans = [
        span("ask", None, 0, 500 * MS, name="POST /ask", kind="server"),
        span("stage", "ask", 10 * MS, 300 * MS, name="rerank",
             attributes={DECLARED_STAGE: "retrieval"}),
        span("call", "stage", 20 * MS, 290 * MS, name="POST /rerank", kind="client"),
    ]  # fmt: skip
    by_id = {s.span_id: s for s in spans}
    matches = attribute_trace(spans, MATCHER).matches
    reason = stage_reason(
        by_id["stage"], matches["stage"], matcher=MATCHER, labels=labels, by_id=by_id,
        matches=matches,
    )  # fmt: skip
    assert (reason.kind, reason.stages) == (DECLARED, ("retrieval",))
    assert reason.text(NAMES) == f"Retrieval — named by the span: {DECLARED_STAGE} = retrieval"
    assert reason.short() == "declared"
    assert matches["call"].inherited_from == "stage"
