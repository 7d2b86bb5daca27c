"""The rule tester says what a rule brings along: the spans inside the ones it takes that
no rule takes count in its stage (or, for a no-stage rule, in none), with their time on
the critical path."""

import re

import pytest
from django.urls import reverse

from apps.analysis.selectors.rule_test import rule_test
from apps.analysis.stage_matching import RuleSpec
from apps.pipelines.models import Pipeline
from tests.builders.configuration import make_no_stage_rule
from tests.builders.ingested_traces import ingest, now_ns
from tests.conftest import TeamWorld, client_for
from tests.dashboards.ordinary_app import newcomer_pipeline, ordinary_trace
from tests.timing import HOUR, MS

TRACES = 3


@pytest.fixture
def pipeline(world: TeamWorld) -> Pipeline:
    """The newcomer's pipeline before a rule for retrieval: its retrieval rule names
    a span these traces do not have."""
    pipeline = newcomer_pipeline(world.team)
    retrieval = pipeline.stages.get(slug="retrieval").rules.get()
    retrieval.span_name = "vector.search*"
    retrieval.save()
    t0 = now_ns() - HOUR
    ingest(world.team, *(ordinary_trace(0xF0 + n, t0 + n * 2000 * MS) for n in range(TRACES)))
    return pipeline


def test_a_stage_rule_brings_the_calls_inside_its_spans_into_the_stage(pipeline: Pipeline):
    stage = pipeline.stages.get(slug="retrieval")

    result = rule_test(pipeline=pipeline, stage=stage, spec=RuleSpec(span_name="retrieval"))

    assert (result.matched_spans, result.matched_traces) == (TRACES, TRACES)
    brought = result.brought
    # The embeddings call and the query in each trace; not the flush, which a no-stage
    # rule keeps out, nor the redis call inside it.
    assert (brought.spans, brought.traces) == (2 * TRACES, TRACES)
    assert brought.names == {"POST /v1/embeddings": TRACES, "query docs": TRACES}
    # 15 ms and 145 ms on the critical path per trace, untracked until now.
    assert brought.critical_ns == TRACES * 160 * MS
    assert brought.critical_ms_per_trace == 160.0
    assert brought.to == {"Retrieval": TRACES * 160 * MS}
    assert brought.was == {"untracked": TRACES * 160 * MS}


def test_a_no_stage_rule_says_what_it_keeps_out_of_its_stage(world: TeamWorld):
    pipeline = newcomer_pipeline(world.team, no_stage=False)
    ingest(world.team, *(ordinary_trace(0xF0 + n, now_ns() - HOUR - n * MS) for n in range(2)))

    result = rule_test(pipeline=pipeline, stage=None, spec=RuleSpec(span_name="cache flush"))

    assert (result.matched_spans, result.matched_traces) == (2, 2)
    assert result.taken_earlier == {}
    assert (result.brought.spans, result.brought.traces) == (2, 2)
    assert result.brought.names == {"redis SET": 2}
    assert result.brought.was == {"Retrieval": 2 * 2 * MS}
    assert result.brought.to == {"untracked": 2 * 2 * MS}


def test_a_no_stage_rule_for_spans_a_stage_takes_says_the_stage_wins(pipeline: Pipeline):
    result = rule_test(pipeline=pipeline, stage=None, spec=RuleSpec(span_name="rerank"))
    assert result.taken_earlier == {"Rerank": TRACES}
    assert result.brought.spans == 0


def test_a_rule_for_a_leaf_inside_a_stage_brings_nothing(pipeline: Pipeline) -> None:
    stage = pipeline.stages.get(slug="rerank")
    make_no_stage_rule(pipeline, span_name="unused")
    result = rule_test(pipeline=pipeline, stage=stage, spec=RuleSpec(span_name="query docs"))
    assert result.matched_spans == TRACES
    assert result.brought.spans == 0


def url_of_tester(pipeline: Pipeline, stage_id: int | None = None) -> str:
    kwargs = {"team_slug": pipeline.team.slug, "pipeline_slug": pipeline.slug}
    if stage_id is None:
        return reverse("dashboards:no_stage_rule_test", kwargs=kwargs)
    return reverse("dashboards:rule_test", kwargs={**kwargs, "stage_id": stage_id})


def test_the_tester_shows_what_the_rule_brings_along(world: TeamWorld, pipeline: Pipeline):
    stage = pipeline.stages.get(slug="retrieval")
    response = client_for(world.viewer).get(
        url_of_tester(pipeline, stage.pk),
        {"span_name": "retrieval", "name_match": "glob", "portion": "whole"},
        headers={"HX-Request": "true"},
    )
    text = " ".join(re.sub(r"<[^>]+>", "", response.content.decode()).split())
    assert response.status_code == 200
    assert (
        "Spans inside them come along: 6 spans that no rule takes, in 3 traces, would count "
        "in Retrieval too, with 160 ms a trace on the critical path (until now: 160 ms "
        "untracked)."
    ) in text
    assert "Most of them: POST /v1/embeddings 3\u00d7, query docs 3\u00d7." in text


def test_the_no_stage_tester_page_answers_members_and_no_one_else(
    world: TeamWorld, pipeline: Pipeline
) -> None:
    url = url_of_tester(pipeline)
    query = {"span_name": "cache flush", "name_match": "glob"}
    answer = client_for(world.viewer).get(url, query, headers={"HX-Request": "true"})
    text = " ".join(re.sub(r"<[^>]+>", "", answer.content.decode()).split())
    assert answer.status_code == 200
    assert "3 spans in 3 of the last 3 traces match this rule." in text
    assert "No span inside them changes stage through it." in text
    full_page = client_for(world.viewer).get(url, query).content.decode()
    assert "Rule test for spans in no stage" in full_page
    assert client_for(world.outsider).get(url, query).status_code == 404


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ({"span_name": "(", "name_match": "regex"}, "Fix the rule"),
        ({"span_name": "(a)\\1", "name_match": "regex"}, "backreferences are not supported"),
        ({"span_name": "x", "name_match": "fuzzy"}, "Fix the rule"),
        ({"span_name": "x" * 501}, "Fix the rule"),
        ({"attributes": "no equals sign"}, "Fix the rule"),
        ({"name_match": "glob"}, "A rule with no condition matches every span"),
    ],
)
def test_a_malformed_no_stage_rule_gets_a_hint_not_an_error(
    world: TeamWorld, pipeline: Pipeline, query: dict[str, str], says: str
) -> None:
    response = client_for(world.viewer).get(
        url_of_tester(pipeline), query, headers={"HX-Request": "true"}
    )
    assert response.status_code == 200
    assert says in response.content.decode()
