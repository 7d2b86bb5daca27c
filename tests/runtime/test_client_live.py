"""The client against the running server: its runtime document over HTTP, its spans
through the official exporter, and stages taken from ``latency_budget.stage`` with no
rule written, children included; the critical path still sums to the end-to-end time."""

import time
from typing import Any

import pytest
from latency_budgets import Budgets

from apps.analysis.models import StageSample
from apps.ingest.models import Trace
from apps.teams.services import ingest_token_create, metrics_token_create
from tests.builders.configuration import make_pipeline, make_stage
from tests.conftest import TeamWorld
from tests.sdk_sender import sdk_provider, workers_settle

pytestmark = [pytest.mark.slow]
REQUESTS = 12


def test_an_app_using_the_client_gets_its_stages_without_a_rule(
    world: TeamWorld, live_server: Any, clean_cache: None, settings: Any
) -> None:
    settings.RUNTIME_DOCUMENT_CACHE_SECONDS = 0
    pipeline = make_pipeline(
        world.team, "ask", budget={"p99": 3000}, match_service="ask-api",
        match_root_span="request ask",
    )  # fmt: skip
    retrieval = make_stage(pipeline, "retrieval", position=0, budget_ms=200)
    rerank = make_stage(pipeline, "rerank", position=1, budget_ms=100)
    _, token = ingest_token_create(team=world.team, name="app", created_by=None)
    _, reader = metrics_token_create(team=world.team, name="app", created_by=None)
    provider = sdk_provider(live_server.url, token, service="ask-api")
    budgets = Budgets.from_server(
        live_server.url, reader, pipelines=["ask"], tracer_provider=provider
    )
    try:
        assert budgets.wait_ready(["ask"], timeout_s=10)
        figures = budgets.source.figures("ask")
        assert figures is not None
        assert figures.deadline_ms == 3000
        assert [s.slug for s in figures.stages] == ["retrieval", "rerank"]
        tracer = provider.get_tracer("app")
        for _ in range(REQUESTS):
            with budgets.request("ask") as req:
                assert 2900 < req.remaining_ms <= 3000
                with req.stage("retrieval"):
                    assert req.timeout_for("retrieval") == 200
                    with tracer.start_as_current_span("db query"):
                        time.sleep(0.02)
                time.sleep(0.005)
                with req.stage("rerank"):
                    time.sleep(0.01)
        provider.shutdown()
        workers_settle()
        traces = Trace.objects.filter(pipeline=pipeline)
        assert traces.count() == REQUESTS
        samples = StageSample.objects.filter(pipeline_id=pipeline.pk)
        by_stage: dict[int, list[StageSample]] = {}
        for sample in samples:
            by_stage.setdefault(sample.stage_id, []).append(sample)
        assert len(by_stage[retrieval.pk]) == REQUESTS
        assert len(by_stage[rerank.pk]) == REQUESTS
        # The child span inherits retrieval: its 20 ms are in the stage.
        assert all(s.wall_ns >= 20_000_000 for s in by_stage[retrieval.pk])
        assert all(10_000_000 <= s.wall_ns < 100_000_000 for s in by_stage[rerank.pk])
        for trace in traces:
            critical = sum(s.critical_ns for s in samples if s.trace_pk == trace.pk)
            assert trace.duration_ns is not None
            assert critical <= trace.duration_ns
        # The next document counts what the app just sent.
        assert budgets.source.refresh("ask")  # type: ignore[attr-defined]
        refreshed = budgets.source.figures("ask")
        assert refreshed is not None
        stage = refreshed.stage("retrieval")
        assert stage is not None
        assert stage.observed.count == REQUESTS
        assert stage.observed.p50 is not None
        assert stage.observed.p50 >= 20
    finally:
        budgets.close()
