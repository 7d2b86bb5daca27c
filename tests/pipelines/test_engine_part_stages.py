"""Stages of an engine's parts of an LLM call lie within the call's stages: the allocation
bar, the dashboard's budget bar and the fit check do not count them again."""

import re

import pytest
from django.utils import timezone
from pytest_django import DjangoAssertNumQueries

from apps.dashboards.selectors.figures import budget_parts, pipeline_figures
from apps.pipelines.models import Pipeline
from apps.pipelines.selectors import pipeline_allocation, stages_marking_engine_parts
from apps.rollups.selectors import pipeline_percentiles
from apps.rollups.selectors.fit import pipeline_fit
from tests.builders.configuration import make_pipeline, make_rule, make_stage
from tests.conftest import TeamWorld, client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def pipeline(world: TeamWorld) -> Pipeline:
    pipeline = make_pipeline(world.team, "vllm-chat", budget={"p95": 3000})
    make_rule(make_stage(pipeline, "ttft", budget_ms=1000), span_name="chat*",
              portion="until_first_token")  # fmt: skip
    make_rule(make_stage(pipeline, "queue", budget_ms=400), span_name="llm_request",
              portion="queue")  # fmt: skip
    prefill = make_stage(pipeline, "prefill", budget_ms=500)
    make_rule(prefill, span_name="llm_request", portion="prefill")
    make_rule(prefill, span_name="llm_request", portion="gateway")
    make_stage(pipeline, "no-rules", budget_ms=100)  # no rule: an ordinary stage
    return pipeline


def test_the_stages_are_marked_in_one_statement(
    pipeline: Pipeline, django_assert_num_queries: DjangoAssertNumQueries
) -> None:
    with django_assert_num_queries(1):
        marked = [
            (stage.slug, part) for stage, part in stages_marking_engine_parts(pipeline=pipeline)
        ]
    assert marked == [("ttft", False), ("queue", True), ("prefill", True), ("no-rules", False)]
    assert [s.engine_part for s in pipeline.stages.prefetch_related("rules")] == [
        False, True, True, False,
    ]  # fmt: skip


def test_allocation_budget_bar_and_fit_leave_them_out(pipeline: Pipeline) -> None:
    allocation = pipeline_allocation(pipeline=pipeline)
    assert allocation.allocated_ms == 1100
    assert [stage.slug for stage in allocation.within] == ["queue", "prefill"]

    now = int(timezone.now().timestamp()) // 10 * 10
    figures = pipeline_figures(
        percentiles=pipeline_percentiles(pipeline=pipeline, start=now - 3600, end=now),
        percentile="p95",
    )
    within = {stage.pk for stage in allocation.within}
    assert [key for key, *_ in budget_parts(figures, within=within)] == [
        "ttft", "no-rules", "unallocated",
    ]  # fmt: skip

    assert [fit.stage.slug for fit in pipeline_fit(pipeline=pipeline).stages] == [
        "ttft", "no-rules",
    ]  # fmt: skip


def test_the_dashboards_stage_table_shows_them_within_the_llm_call(
    world: TeamWorld, pipeline: Pipeline
) -> None:
    html = client_for(world.viewer).get("/teams/acme/dashboards/vllm-chat/").content.decode()
    rows = dict(re.findall(r'<tr data-stage="([a-z-]+)"(.*?)</tr>', html, re.S))
    assert "part of the LLM call" in rows["queue"]
    assert "part of the LLM call" in rows["prefill"]
    assert "part of the LLM call" not in rows["ttft"]
