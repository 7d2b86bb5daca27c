import time
from typing import Any

import pytest

from apps.analysis import stage_matching as matching
from apps.analysis.pipeline_routing import PipelineRouter
from apps.analysis.stage_matching import (
    AFTER_FIRST_TOKEN,
    REGEX,
    UNTIL_FIRST_TOKEN,
    WHOLE,
    RuleSpec,
    SpanMatch,
    StageMatcher,
    StageSpec,
    first_token_ns,
)
from apps.pipelines.selectors import pipeline_with_stages
from apps.pipelines.services import span_rule_create
from tests.builders.configuration import make_pipeline, make_stage, make_team
from tests.builders.spans import span
from tests.timing import MS


def stage_of(rule: RuleSpec, **span_fields: Any) -> str | None:
    matcher = StageMatcher([StageSpec("hit", [rule])])
    fields: dict[str, Any] = {"name": "op"} | span_fields
    return matcher.match(span("s", None, 0, 10, **fields)).before_stage


@pytest.mark.parametrize(
    ("pattern", "name", "hit"),
    [
        ("vector.search*", "vector.search.query", True),
        ("vector.search*", "vector.search", True),
        ("vector.search*", "db.vector.search", False),
        ("vector.search*", "Vector.Search", False),
        ("*rewrite*", "llm rewrite query", True),
        ("auth?", "auth1", True),
        ("auth?", "auth12", False),
        ("[ab]pi", "bpi", True),
        ("[ab]pi", "cpi", False),
        ("[a-c]pi", "cpi", True),
        ("[!a-c]pi", "cpi", False),
        ("[!a-c]pi", "dpi", True),
        ("[]]x", "]x", True),
        ("db[", "db[", True),
        ("chat ?pt-*", "chat gpt-4o", True),
        ("chat ?pt-*", "chat pt-4o", False),
        ("llm.*", "llm.chat", True),
        ("llm.*", "llmXchat", False),
        ("a+b", "a+b", True),
        ("a+b", "aab", False),
        ("call(x)", "call(x)", True),
        ("^auth$", "^auth$", True),
        ("^auth$", "auth", False),
        ("a\\b", "a\\b", True),
        ("*.query", "vector.search.query", True),
    ],
)
def test_a_glob_must_match_the_whole_span_name(pattern: str, name: str, hit: bool) -> None:
    assert (stage_of(RuleSpec(span_name=pattern), name=name) == "hit") is hit


@pytest.mark.parametrize(
    ("pattern", "name", "hit"),
    [
        ("search", "vector.search.query", True),
        ("^search$", "vector.search.query", False),
        (r"^(chat|completion)\s", "chat gpt-4o", True),
        ("vector.search*", "vectorXsearc", True),
    ],
)
def test_a_regex_matches_anywhere_in_the_span_name(pattern: str, name: str, hit: bool) -> None:
    rule = RuleSpec(span_name=pattern, name_match=REGEX)
    assert (stage_of(rule, name=name) == "hit") is hit


def test_a_regex_re2_cannot_run_never_matches_and_later_rules_still_do() -> None:
    stages = [
        StageSpec("broken", [RuleSpec(span_name=r"^(a)\1$", name_match=REGEX)]),
        StageSpec("fallback", [RuleSpec(span_name="a*")], position=1),
    ]
    assert StageMatcher(stages).match(span("s", None, 0, 10, name="aa")).before_stage == (
        "fallback"
    )


def test_a_catastrophic_regex_is_matched_in_linear_time() -> None:
    matcher = StageMatcher([StageSpec("s", [RuleSpec(span_name="^(a+)+$", name_match=REGEX)])])
    started = time.process_time()
    match = matcher.match(span("s", None, 0, 10, name="a" * 41 + "!"))
    assert time.process_time() - started < 0.1
    assert match.before_stage is None


@pytest.mark.django_db
def test_analysis_routes_and_matches_a_saved_catastrophic_rule_in_linear_time() -> None:
    pipeline = make_pipeline(make_team("acme"), "chat", match_root_span="a*")
    stage = make_stage(pipeline, "s")
    span_rule_create(stage=stage, span_name="^(a+)+$", name_match=REGEX)
    router = PipelineRouter([pipeline_with_stages(pipeline=pipeline)])
    name = "a" * 41 + "!"
    started = time.process_time()
    routed = router.route(span("root", None, 0, 10, name=name))
    assert routed is not None
    assert routed.matcher.match(span("s", "root", 0, 10, name=name)).before_stage is None
    assert time.process_time() - started < 0.1


@pytest.mark.parametrize(
    ("wanted", "actual", "hit"),
    [
        (200, 200, True),
        (200, "200", True),
        (200, 200.0, True),
        ("200", 200, True),
        (200, 201, False),
        (200, "200.0", False),
        (0.5, 0.5, True),
        (0.5, "0.5", True),
        (True, True, True),
        (True, "true", True),
        ("true", True, True),
        (True, "True", False),
        (True, 1, False),
        (False, False, True),
        (False, None, False),
        ("chat", "chat", True),
        ("chat", "Chat", False),
        ("a", ["a"], False),
    ],
)
def test_attribute_values_compare_by_their_text(wanted: Any, actual: Any, hit: bool) -> None:
    rule = RuleSpec(attributes={"key": wanted})
    assert (stage_of(rule, attributes={"key": actual}) == "hit") is hit


def test_every_attribute_must_be_present_and_equal() -> None:
    rule = RuleSpec(attributes={"gen_ai.operation.name": "chat", "gen_ai.system": "openai"})
    both = {"gen_ai.operation.name": "chat", "gen_ai.system": "openai"}
    assert stage_of(rule, attributes=both) == "hit"
    assert stage_of(rule, attributes={"gen_ai.operation.name": "chat"}) is None


@pytest.mark.parametrize(
    ("kind", "hit"),
    [("client", True), ("CLIENT", True), ("SPAN_KIND_CLIENT", True), ("server", False)],
)
def test_span_kind_ignores_case_and_the_otlp_prefix(kind: str, hit: bool) -> None:
    assert (stage_of(RuleSpec(span_kind="client"), kind=kind) == "hit") is hit


def test_service_must_match_exactly() -> None:
    rule = RuleSpec(service="retriever")
    assert stage_of(rule, service="retriever") == "hit"
    assert stage_of(rule, service="retriever-2") is None


def test_all_conditions_of_a_rule_must_hold() -> None:
    rule = RuleSpec(span_name="embed*", span_kind="client", service="rag", attributes={"n": 3})
    good: dict[str, Any] = {"name": "embed query", "kind": "client", "service": "rag"}
    assert stage_of(rule, attributes={"n": 3}, **good) == "hit"
    assert stage_of(rule, attributes={"n": 4}, **good) is None
    assert stage_of(rule, attributes={"n": 3}, **(good | {"kind": "server"})) is None
    assert stage_of(rule, attributes={"n": 3}, **(good | {"service": "api"})) is None
    assert stage_of(rule, attributes={"n": 3}, **(good | {"name": "rerank"})) is None


def test_stages_are_tried_by_position_before_rule_order() -> None:
    llm = {"openinference.span.kind": "LLM"}
    matcher = StageMatcher(
        [
            StageSpec("generation", [RuleSpec(attributes=llm)], position=5),
            StageSpec("plan", [RuleSpec(span_name="*plan*", attributes=llm)], position=1),
        ]
    )
    assert matcher.stage_slugs == ("plan", "generation")
    assert matcher.match(span("s", None, 0, 10, name="plan step", attributes=llm)).before_stage == (
        "plan"
    )
    assert matcher.match(span("s", None, 0, 10, name="answer", attributes=llm)).before_stage == (
        "generation"
    )


def test_within_a_stage_rules_are_tried_by_position() -> None:
    matcher = StageMatcher(
        [
            StageSpec(
                "ttft",
                [
                    RuleSpec(span_name="llm", portion=UNTIL_FIRST_TOKEN, first_token_event="b"),
                    RuleSpec(
                        span_name="llm",
                        portion=UNTIL_FIRST_TOKEN,
                        first_token_event="a",
                        position=-1,
                    ),
                ],
            )
        ]
    )
    llm = span("s", None, 0, 100, name="llm", events=(("b", 30), ("a", 60)))
    assert matcher.match(llm) == SpanMatch(60, "ttft", None)


RAG = [
    StageSpec("ttft", [RuleSpec(span_name="chat*", portion=UNTIL_FIRST_TOKEN)]),
    StageSpec("generation", [RuleSpec(span_name="chat*", portion=AFTER_FIRST_TOKEN)]),
    StageSpec("everything", [RuleSpec(span_name="*", portion=WHOLE)]),
]


def test_an_llm_span_splits_at_time_to_first_chunk() -> None:
    llm = span(
        "s",
        None,
        1000 * MS,
        3000 * MS,
        name="chat",
        attributes={"gen_ai.response.time_to_first_chunk": 0.25},
    )
    assert StageMatcher(RAG).match(llm) == SpanMatch(1250 * MS, "ttft", "generation")


def test_an_llm_span_splits_at_its_first_token_event() -> None:
    llm = span("s", None, 0, 100, name="chat", events=(("chunk", 10), ("first_token", 40)))
    match = StageMatcher(RAG).match(llm)
    assert match == SpanMatch(40, "ttft", "generation")
    assert match.parts(llm) == [(0, 40, "ttft"), (40, 100, "generation")]


def test_the_rule_names_the_first_token_event() -> None:
    stages = [
        StageSpec(
            "ttft",
            [
                RuleSpec(
                    span_name="chat",
                    portion=UNTIL_FIRST_TOKEN,
                    first_token_event="gen_ai.content.chunk",
                )
            ],
        )
    ]
    llm = span(
        "s",
        None,
        0,
        100,
        name="chat",
        events=(("first_token", 10), ("gen_ai.content.chunk", 30), ("gen_ai.content.chunk", 20)),
    )
    assert StageMatcher(stages).match(llm) == SpanMatch(20, "ttft", None)


def test_time_to_first_chunk_wins_over_the_event_and_is_clamped_into_the_span() -> None:
    events = (("first_token", 40),)
    assert (
        first_token_ns(
            span(
                "s",
                None,
                0,
                100,
                attributes={"gen_ai.response.time_to_first_chunk": 1e-8},
                events=events,
            )
        )
        == 10
    )
    assert (
        first_token_ns(
            span("s", None, 0, 100, attributes={"gen_ai.response.time_to_first_chunk": 9.0})
        )
        == 100
    )
    assert (
        first_token_ns(
            span("s", None, 0, 100, attributes={"gen_ai.response.time_to_first_chunk": -1})
        )
        == 0
    )
    assert (
        first_token_ns(
            span("s", None, 0, 100, attributes={"gen_ai.response.time_to_first_chunk": "2e-8"})
        )
        == 20
    )
    assert (
        first_token_ns(
            span(
                "s",
                None,
                0,
                100,
                attributes={"gen_ai.response.time_to_first_chunk": "soon"},
                events=events,
            )
        )
        == 40
    )
    assert first_token_ns(span("s", None, 50, 100, events=(("first_token", 10),))) == 50
    assert first_token_ns(span("s", None, 0, 100)) is None


@pytest.mark.parametrize(
    "stored",
    [1e300, -1e300, "1e300", "-1e300", 10**400, -(10**400), "1" + "0" * 300],
    ids=["1e300", "-1e300", "'1e300'", "'-1e300'", "10**400", "-10**400", "300 digits"],
)
def test_a_stored_time_to_first_chunk_too_big_for_any_span_means_no_first_token(
    stored: Any,
) -> None:
    # Spans stored before ingestion checked the value; these used to raise OverflowError.
    llm = span("s", None, 0, 100, name="chat", attributes={matching.TIME_TO_FIRST_CHUNK: stored})

    assert first_token_ns(llm) is None
    assert StageMatcher(RAG).match(llm) == SpanMatch(None, "ttft", "ttft")


def test_no_stored_time_to_first_chunk_makes_first_token_ns_raise() -> None:
    values = [1e300, "1e300", 10**400, "nan", "inf", True, False, [0.25], {"s": 1}, "", "soon"]
    for value in values:
        llm = span("s", None, 0, 100, attributes={matching.TIME_TO_FIRST_CHUNK: value})
        assert first_token_ns(llm) is None, value


def test_an_unusable_stored_time_to_first_chunk_falls_back_to_the_event() -> None:
    events = (("first_token", 40),)
    llm = span("s", None, 0, 100, attributes={matching.TIME_TO_FIRST_CHUNK: 1e300}, events=events)

    assert first_token_ns(llm) == 40


def test_without_a_first_token_until_first_token_takes_the_whole_span() -> None:
    llm = span("s", None, 0, 100, name="chat")
    assert StageMatcher(RAG).match(llm) == SpanMatch(None, "ttft", "ttft")


def test_without_a_first_token_after_first_token_rules_do_not_match() -> None:
    llm = span("s", None, 0, 100, name="chat")
    assert StageMatcher(RAG[1:]).match(llm) == SpanMatch(None, "everything", "everything")
    assert StageMatcher(RAG[1:2]).match(llm) == SpanMatch(None, None, None)


def test_a_whole_rule_earlier_in_order_takes_both_parts() -> None:
    stages = [StageSpec("llm", [RuleSpec(span_name="chat")]), *RAG]
    llm = span("s", None, 0, 100, name="chat", events=(("first_token", 40),))
    assert StageMatcher(stages).match(llm) == SpanMatch(40, "llm", "llm")


def test_a_part_no_stage_claims_is_untracked() -> None:
    llm = span("s", None, 0, 100, name="chat", events=(("first_token", 40),))
    assert StageMatcher(RAG[:1]).match(llm) == SpanMatch(40, "ttft", None)
    assert StageMatcher([]).match(llm).stage_at(50) is None


def test_duplicate_stage_slugs_and_unknown_portions_are_refused() -> None:
    with pytest.raises(ValueError, match="unique"):
        StageMatcher([StageSpec("a"), StageSpec("a")])
    with pytest.raises(ValueError, match="portion"):
        StageMatcher([StageSpec("a", [RuleSpec(span_name="x", portion="most")])])


def test_remembered_decisions_still_tell_spans_apart_by_rule_attributes() -> None:
    matcher = StageMatcher(
        [
            StageSpec("embedding", [RuleSpec(attributes={"gen_ai.operation.name": "embeddings"})]),
            StageSpec("llm", [RuleSpec(attributes={"gen_ai.operation.name": "chat"})]),
        ]
    )
    for _ in range(2):
        for operation, stage in [("embeddings", "embedding"), ("chat", "llm"), ("x", None)]:
            one = span("s", None, 0, 10, attributes={"gen_ai.operation.name": operation})
            assert matcher.match(one).before_stage == stage


def test_a_full_decision_cache_starts_over(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(matching, "MATCH_CACHE_SIZE", 2)
    matcher = StageMatcher(RAG)
    names = ["chat", "chat.a", "other", "chat", "chatter", "x"]
    for _ in range(2):
        for name in names:
            one = span("s", None, 0, 100, name=name, events=(("first_token", 40),))
            expected = ("ttft", "generation") if name.startswith("chat") else ("everything",) * 2
            match = matcher.match(one)
            assert (match.before_stage, match.after_stage) == expected


def test_a_span_that_names_its_stage_goes_there_before_any_written_rule() -> None:
    matcher = StageMatcher(RAG)
    declared = span(
        "s", None, 0, 100, name="chat", attributes={matching.DECLARED_STAGE: "everything"}
    )
    match = matcher.match(declared)
    assert (match.before_stage, match.after_stage) == ("everything", "everything")
    assert match.rule is not None
    assert matcher.is_declared_rule(match.rule)
    assert not matcher.is_no_stage_rule(match.rule)


def test_a_span_naming_a_stage_the_pipeline_lacks_goes_on_to_the_written_rules() -> None:
    matcher = StageMatcher(RAG)
    unknown = span(
        "s", None, 0, 100, name="chat", attributes={matching.DECLARED_STAGE: "rerank"},
        events=(("first_token", 40),),
    )  # fmt: skip
    match = matcher.match(unknown)
    assert (match.before_stage, match.after_stage) == ("ttft", "generation")
    assert match.rule is not None
    assert not matcher.is_declared_rule(match.rule)
