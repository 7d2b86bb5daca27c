"""The spans no stage took, grouped, on stored traces with known answers; and the read's
bounds."""

from typing import Any

import pytest
from django.test import override_settings

from apps.analysis.rule_suggestions import RuleSuggestion, StageChoice, stage_for
from apps.analysis.selectors import unmatched_spans as selector
from apps.analysis.selectors.unmatched_spans import unmatched_spans, unmatched_spans_recent
from apps.analysis.span_groups import AttributeValues, median
from apps.pipelines.models import Pipeline
from tests.builders.configuration import make_pipeline, make_rule
from tests.builders.ingested_traces import ingest, now_ns
from tests.builders.spans import HandSpan, span
from tests.conftest import TeamWorld
from tests.dashboards.unmatched_spans_data import OPERATION, ask_pipeline, ask_trace
from tests.timing import MS


@pytest.fixture
def ask(world: TeamWorld) -> Pipeline:
    pipeline = ask_pipeline(world)
    t0 = now_ns() - 10 * 60_000 * MS
    ingest(world.team, *(ask_trace(i, t0 + i * 2000 * MS) for i in range(3)))
    return pipeline


def test_the_spans_no_stage_took_are_grouped_with_their_counts_and_times(ask: Pipeline) -> None:
    found = unmatched_spans(pipeline=ask)
    assert (found.traces, found.spans, found.stopped_by) == (3, 26, "")
    rows = [(g.name, g.kind, g.spans, g.traces, g.total_ns, g.critical_ns, g.p50_ns)
            for g in found.groups]  # fmt: skip
    # Biggest untracked critical-path time first. The database query inherits retrieval,
    # the redis call is under the flush (no stage on purpose), the root is set apart.
    assert rows == [
        ("POST /v1/rerank", "client", 3, 3, 330 * MS, 330 * MS, 110 * MS),
        ("rerank", "internal", 3, 3, 360 * MS, 30 * MS, 120 * MS),
        ("embed query", "client", 2, 2, 23 * MS, 23 * MS, 11.5 * MS),
    ]
    assert (found.unmatched_spans, found.group_count) == (8, 3)
    # The HTTP call is inside the rerank span: a rule for that one would take it along.
    http, rerank, embed = found.groups
    assert (http.inside, rerank.inside, embed.inside) == (
        ("rerank", "chat-api", "internal"),
        None,
        None,
    )
    assert (http.held_ns, rerank.held_ns, embed.held_ns) == (330 * MS, 360 * MS, 23 * MS)
    assert [g.example_trace_hex for g in found.groups] == [f"{0xA0:032x}"] * 3


def test_the_untracked_time_is_set_apart_and_adds_up(ask: Pipeline) -> None:
    found = unmatched_spans(pipeline=ask)
    # Root's own time: 5+2+10+10+5, 5+5+10+10+5 and 20+10+10+5 ms.
    assert found.root_ns == (32 + 35 + 45) * MS
    assert found.no_stage_ns == 3 * 15 * MS  # the flush, and the redis call inside it
    assert found.partial_ns == 3 * 400 * MS  # the chat call after its first token
    assert found.unmatched_ns == (330 + 30 + 23) * MS
    assert found.untracked_ns == 1740 * MS
    assert found.untracked_ns == (
        found.root_ns + found.no_stage_ns + found.partial_ns + found.unmatched_ns
    )
    # With retrieval's 170 ms and the first token's 250 ms a trace, end to end exactly.
    assert found.e2e_ns == 3000 * MS == found.untracked_ns + 3 * (170 + 250) * MS
    assert [(s.slug, s.traces) for s in found.stages] == [
        ("embedding", 0), ("retrieval", 3), ("rerank", 0), ("ttft", 3),
    ]  # fmt: skip
    assert [s.slug for s in found.empty_stages] == ["embedding", "rerank"]
    http = found.groups[0]
    assert found.share_of_traces(http) == 1.0
    assert found.share_of_untracked(http) == pytest.approx(330 / 1740)


def test_each_group_shows_the_attributes_that_say_what_it_is(ask: Pipeline) -> None:
    http, rerank, embed = unmatched_spans(pipeline=ask).groups
    # Only the telling keys, most frequent value first; the body size is not one of them.
    assert http.attributes == (
        AttributeValues("http.request.method", (("POST", 3),), spans=3, distinct=1),
        AttributeValues(
            "server.address", (("api.cohere.com", 2), ("api.jina.ai", 1)), spans=3, distinct=2
        ),
    )
    assert rerank.attributes == ()
    assert embed.attributes == (
        AttributeValues(OPERATION, (("embeddings", 2),), spans=2, distinct=1),
    )


def test_each_group_suggests_a_rule_for_the_stage_it_names(ask: Pipeline) -> None:
    http, rerank, embed = unmatched_spans(pipeline=ask).groups
    assert http.suggestion == RuleSuggestion("rerank", span_name="POST /v1/rerank")
    assert rerank.suggestion == RuleSuggestion("rerank", span_name="rerank")
    assert embed.suggestion == RuleSuggestion("embedding", attribute=(OPERATION, "embeddings"))
    assert embed.suggestion.describe() == "gen_ai.operation.name=embeddings"


def test_a_rule_saved_since_takes_its_spans_out_of_the_next_answer(ask: Pipeline) -> None:
    before = unmatched_spans_recent(pipeline=ask)
    assert before.group_count == 3
    make_rule(ask.stages.get(slug="rerank"), span_name="rerank")
    after = unmatched_spans_recent(pipeline=ask)
    # The HTTP call now inherits rerank; only the embeddings calls are left.
    assert [g.name for g in after.groups] == ["embed query"]
    assert [s.slug for s in after.empty_stages] == ["embedding"]


def test_a_window_reads_only_the_traces_that_started_in_it(world: TeamWorld) -> None:
    pipeline = ask_pipeline(world)
    old = now_ns() - 3 * 3600 * 1000 * MS
    ingest(world.team, ask_trace(0, old), ask_trace(1, now_ns() - 60_000 * MS))
    assert unmatched_spans(pipeline=pipeline, window="1h").traces == 1
    assert unmatched_spans(pipeline=pipeline, window="6h").traces == 2


def test_a_pipeline_without_traces_has_nothing_to_show(world: TeamWorld) -> None:
    found = unmatched_spans(pipeline=ask_pipeline(world))
    assert (found.traces, found.groups, found.untracked_ns) == (0, (), 0)
    assert [s.slug for s in found.empty_stages] == ["embedding", "retrieval", "rerank", "ttft"]


def test_another_teams_traces_are_never_read(world: TeamWorld, ask: Pipeline) -> None:
    theirs = make_pipeline(world.other_team, "ask", match_root_span="POST /ask")
    assert unmatched_spans(pipeline=theirs).traces == 0
    assert unmatched_spans(pipeline=ask).traces == 3


def huge_trace(index: int, t0: int) -> list[HandSpan]:
    """Spans of a megabyte of attributes each, a telling one among them too long to show."""
    blob = {"blob": "x" * 1_000_000, "server.address": "h" * 5000, "db.system": "qdrant"}
    trace_id = 0xB0 + index
    return [
        span(1, None, t0, t0 + 100 * MS, name="POST /ask", kind="server", trace_id=trace_id),
        *(
            span(2 + i, 1, t0 + i * MS, t0 + (i + 1) * MS, name="search", kind="client",
                 attributes=blob, trace_id=trace_id)
            for i in range(8)
        ),
    ]  # fmt: skip


def test_huge_spans_are_read_within_the_byte_budget(world: TeamWorld) -> None:
    pipeline = ask_pipeline(world)
    t0 = now_ns() - 60_000 * MS
    ingest(world.team, *(huge_trace(i, t0 + i * 1000 * MS) for i in range(4)))
    whole = unmatched_spans(pipeline=pipeline)
    assert whole.traces == 4
    # Skeletons and the short telling values only: 9 spans at 1 KiB and a few bytes each.
    one = whole.bytes_read // 4
    assert one < 9 * 1024 + 9 * 200
    (search,) = whole.groups
    assert [a.key for a in search.attributes] == ["db.system"]  # the long one stayed behind
    assert search.suggestion == RuleSuggestion("retrieval", attribute=("db.system", "qdrant"))

    with override_settings(UNMATCHED_SPANS_MAX_BYTES=2 * one + one // 2):
        bounded = unmatched_spans(pipeline=pipeline)
    assert (bounded.traces, bounded.stopped_by, bounded.spans) == (2, "bytes", 18)
    assert bounded.bytes_read == 2 * one <= bounded.byte_budget


def test_the_sample_stops_before_the_span_cap(
    world: TeamWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipeline = ask_pipeline(world)
    t0 = now_ns() - 60_000 * MS
    ingest(world.team, *(ask_trace(i, t0 + i * 2000 * MS) for i in range(3)))
    monkeypatch.setattr("apps.analysis.selectors.unmatched_spans.SPAN_CAP", 20)
    found = unmatched_spans(pipeline=pipeline)
    # Newest first: the third trace (8 spans) and the second (9); the first would pass 20.
    assert (found.traces, found.spans, found.stopped_by) == (2, 17, "spans")


def test_the_median_interpolates_as_postgresql_does() -> None:
    assert median([5]) == 5
    assert median([30, 10]) == 20
    assert median([4, 1, 3]) == 3


STAGES = [StageChoice("query-rewrite", "Query rewrite"), StageChoice("embed", "Embedding"),
          StageChoice("retrieval", "Retrieval"), StageChoice("rerank", "Rerank"),
          StageChoice("generation", "LLM answer")]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "values", "empty", "expected"),
    [
        ("POST /v1/embeddings", [], set(), "embed"),
        ("query", ["qdrant"], set(), "retrieval"),
        ("cohere.rerank", [], {"embed"}, "rerank"),
        ("chat gpt-4o", ["chat"], set(), "generation"),
        ("SELECT users", ["postgresql"], {"rerank"}, "rerank"),  # no word: an empty stage
        ("SELECT users", [], set(), "query-rewrite"),  # nothing to go by: the first stage
        ("query docs", ["qdrant"], set(), "retrieval"),  # the value says more than the name
        ("rewrite query", [], set(), "query-rewrite"),
    ],
)
def test_the_stage_suggested_is_the_one_the_words_name(
    name: str, values: list[str], empty: set[str], expected: str
) -> None:
    chosen = stage_for(name, values, STAGES, empty)
    assert chosen is not None
    assert chosen.slug == expected


def test_an_empty_stage_named_comes_before_one_with_samples() -> None:
    stages = [StageChoice("search", "Search"), StageChoice("web-search", "Web search")]
    assert stage_for("search", [], stages, {"web-search"}) == stages[1]
    assert stage_for("search", [], stages, set()) == stages[0]
    assert stage_for("x", [], [], set()) is None


def test_every_limit_shares_one_read_within_the_cache_time(
    ask: Pipeline, clean_cache: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[int] = []
    real = selector.spans_read

    def counted(*args: Any, **kwargs: Any) -> Any:
        reads.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(selector, "spans_read", counted)
    answers = [unmatched_spans_recent(pipeline=ask, limit=limit) for limit in (1, 2, 50, 1)]
    assert [len(a.groups) for a in answers] == [1, 2, 3, 1]
    assert [a.group_count for a in answers] == [3, 3, 3, 3]
    assert len(reads) == 1
    unmatched_spans_recent(pipeline=ask, window="6h")  # another window is another read
    assert len(reads) == 2
