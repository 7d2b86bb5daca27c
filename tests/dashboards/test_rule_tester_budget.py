"""The rule tester reads the newest traces whole until its byte budget, and says how far
back that took it: traces, spans and MiB."""

import re

import pytest
from django.test import override_settings

from apps.analysis.pipeline_routing import compile_pipeline
from apps.analysis.span_projection import span_projection
from apps.analysis.stage_matching import CompiledRule, RuleSpec
from apps.analysis.stored_spans import spans_read
from apps.core.figures import format_size
from apps.ingest.models import Trace
from apps.pipelines.models import Pipeline
from apps.pipelines.selectors import pipeline_with_stages
from tests.builders.ingested_traces import ingest, make_rag_pipeline, now_ns
from tests.builders.spans import rag_spans
from tests.conftest import TeamWorld, client_for
from tests.timing import MS

RULE = {"span_name": "vector.search*", "name_match": "glob", "portion": "whole"}


def rule_test_url(pipeline: Pipeline) -> str:
    stage = pipeline.stages.get(slug="retrieval")
    return f"/teams/acme/dashboards/{pipeline.slug}/stages/{stage.pk}/rule-test/"


def one_trace_bytes(pipeline: Pipeline, trace: Trace) -> int:
    """What the tester reads of one of these traces, all alike but for their ids."""
    matcher = compile_pipeline(pipeline_with_stages(pipeline=pipeline)).matcher
    candidate = CompiledRule("retrieval", RuleSpec(span_name="vector.search*"))
    projection = span_projection((*matcher.rules, candidate))
    return spans_read([trace], projection=projection, max_bytes=2**30).bytes_read


def looked_at(html: str) -> str:
    found = re.search(r'data-role="looked-at">(.*?)</span>', html, re.S)
    assert found is not None
    return re.sub(r"\s+", " ", found.group(1))


@pytest.fixture
def four_traces(world: TeamWorld) -> tuple[Pipeline, int]:
    """acme's RAG pipeline with four alike traces a second apart; what one weighs."""
    pipeline = make_rag_pipeline(world.team)
    t0 = now_ns() - 10 * 60_000 * MS
    ingest(world.team, *(rag_spans(0xC0 + i, t0 + i * 1000 * MS) for i in range(4)))
    return pipeline, one_trace_bytes(pipeline, Trace.objects.get(trace_id=(0xC0).to_bytes(16)))


@pytest.mark.parametrize("role", ["owner", "editor", "viewer"])
def test_within_its_budget_the_tester_says_what_it_read(
    world: TeamWorld, four_traces: tuple[Pipeline, int], role: str
) -> None:
    pipeline, one = four_traces
    html = client_for(getattr(world, role)).get(rule_test_url(pipeline), RULE).content.decode()
    assert re.search(r'data-role="matched">8<', html)
    assert looked_at(html) == f"Tested on the last 4 traces, 20 spans, {format_size(4 * one)}."


def test_the_tester_stops_at_its_byte_budget_and_says_so(
    world: TeamWorld, four_traces: tuple[Pipeline, int]
) -> None:
    pipeline, one = four_traces
    # Room for two traces and a half: the third is not read.
    with override_settings(RULE_TEST_MAX_BYTES=2 * one + one // 2):
        html = client_for(world.viewer).get(rule_test_url(pipeline), RULE).content.decode()

    assert re.search(r'data-role="matched">4<', html)  # two retrieval spans in each of two
    assert re.search(r'data-role="traces">2<', html)
    assert looked_at(html) == (
        f"Tested on the last 2 traces, 10 spans, {format_size(2 * one)}: the tester stops "
        f"before the trace that would take it past {format_size(2 * one + one // 2)} of span "
        "names and rule attributes."
    )


def test_an_outsider_gets_404(world: TeamWorld, four_traces: tuple[Pipeline, int]) -> None:
    pipeline, _ = four_traces
    assert client_for(world.outsider).get(rule_test_url(pipeline), RULE).status_code == 404
