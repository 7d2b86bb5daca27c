"""Lever advice from replays with known answers, and the advice a client receives."""

from datetime import timedelta
from typing import Any

import numpy as np
from django.test import Client
from django.utils import timezone

from apps.teams.services import metrics_token_create
from apps.whatif.advice import AdviceStage, advice_find
from apps.whatif.models import RunKind, RunStatus, WhatIfRun
from apps.whatif.selectors.advice import pipeline_advice
from tests.builders.configuration import make_pipeline, make_stage
from tests.conftest import TeamWorld
from tests.whatif.models import by_name, model_of, ms_span

CHAIN = by_name("a", "b", "c")


def chains(b_times: list[float]) -> list[list[Any]]:
    return [
        [
            ms_span(1, None, 0, 100 + b + 300, "server"),
            ms_span(2, 1, 0, 100, "a"),
            ms_span(3, 1, 100, 100 + b, "b"),
            ms_span(4, 1, 110 + b, 400 + b, "c"),
        ]
        for b in b_times
    ]


def tail_of_b() -> list[float]:
    """b takes 100-190 ms in 90 traces and 2 s in 10: those break a 1 s deadline."""
    return [100.0 + i for i in range(90)] + [2000.0] * 10


def test_a_slow_tail_is_advised_a_hedge_and_a_cap_with_their_effect() -> None:
    model = model_of(chains(tail_of_b()), CHAIN)
    stages = [
        AdviceStage("a", "A", None, False),
        AdviceStage("b", "B", 200, False),
        AdviceStage("c", "C", None, False),
    ]
    found = {a.lever: a for a in advice_find(model, stages=stages, deadline_ms=1000)}
    assert set(found) == {"hedge", "cap"}
    cap = found["cap"]
    # Capped at 200 ms, every request ends by 100 + 200 + 300 = 600 ms.
    assert cap.before.within_pct == 90.0
    assert cap.after.within_pct == 100.0
    assert cap.after.p99_ms == 600.0
    assert cap.extra_pct == 10.0
    hedge = found["hedge"]
    assert hedge.after.within_pct is not None
    assert hedge.after.within_pct > 90.0
    assert hedge.extra_pct <= 20.0
    assert hedge.change.op == "hedge"
    assert hedge.as_data()["changes"] == [{"stage": "b", "op": "hedge", "ms": hedge.setting_ms}]


def test_a_first_token_stage_is_advised_a_fallback() -> None:
    model = model_of(chains(tail_of_b()), CHAIN)
    stages = [AdviceStage("b", "B", None, True)]
    found = {a.lever: a for a in advice_find(model, stages=stages, deadline_ms=1000)}
    fallback = found["fallback"]
    median = float(np.median(tail_of_b()))
    assert fallback.change.fallback_ms == round(median)
    # Past the timeout the stage takes timeout + the median: all within the deadline.
    assert fallback.after.within_pct == 100.0
    assert "cap" not in found


def test_no_advice_where_nothing_is_late_or_too_few_traces_ran() -> None:
    steady = model_of(chains([100.0 + i for i in range(60)]), CHAIN)
    stages = [AdviceStage("b", "B", 500, True)]
    assert advice_find(steady, stages=stages, deadline_ms=1000) == []
    few = model_of(chains([100.0, 2000.0, 2000.0]), CHAIN)
    assert advice_find(few, stages=stages, deadline_ms=1000) == []


def test_the_runtime_document_carries_the_latest_search_advice(world: TeamWorld) -> None:
    pipeline = make_pipeline(world.team, "ask", budget={"p95": 2000})
    make_stage(pipeline, "llm", budget_ms=800)
    make_stage(pipeline, "rerank", budget_ms=200)
    advice = [
        {"lever": "fallback", "stage": "llm", "changes": [
            {"stage": "llm", "op": "fallback", "ms": 900.0, "fallback_ms": 300.0}]},
        {"lever": "hedge", "stage": "llm", "changes": [
            {"stage": "llm", "op": "hedge", "ms": 700.0}]},
        {"lever": "cap", "stage": "rerank", "changes": [
            {"stage": "rerank", "op": "cap", "ms": 200.0}]},
    ]  # fmt: skip
    now = timezone.now()
    WhatIfRun.objects.create(
        team=world.team, pipeline=pipeline, kind=RunKind.LEVERS, key="advice",
        params={"from": 0, "to": 1}, status=RunStatus.DONE, finished_at=now,
        result={"levers": [], "advice": advice},
    )  # fmt: skip
    # A search on top of a scenario tried by hand is no advice.
    WhatIfRun.objects.create(
        team=world.team, pipeline=pipeline, kind=RunKind.LEVERS, key="tried",
        params={"from": 0, "to": 1, "changes": [{"stage": "llm", "op": "remove"}]},
        status=RunStatus.DONE, finished_at=now, result={"levers": [], "advice": []},
    )  # fmt: skip
    wanted = {
        "llm": {"first_token_ms": 900.0, "fallback_ms": 300.0, "hedge_after_ms": 700.0},
        "rerank": {"cap_ms": 200.0},
    }
    assert pipeline_advice(pipeline=pipeline) == wanted
    _, raw = metrics_token_create(team=world.team, name="client", created_by=None)
    document = Client().get("/v1/budgets/ask", HTTP_AUTHORIZATION=f"Bearer {raw}").json()
    assert {s["stage"]: s["advice"] for s in document["stages"]} == wanted
    # Advice an hour old is of traffic that may be gone.
    WhatIfRun.objects.filter(key="advice").update(finished_at=now - timedelta(hours=2))
    assert pipeline_advice(pipeline=pipeline) == {}


def test_only_pipelines_a_client_reads_get_a_fresh_search(world: TeamWorld) -> None:
    from apps.whatif.services import advice_runs_request

    read = make_pipeline(world.team, "read", budget={"p95": 2000})
    make_pipeline(world.team, "unread", budget={"p95": 2000})
    _, raw = metrics_token_create(team=world.team, name="client", created_by=None)
    assert Client().get("/v1/budgets/read", HTTP_AUTHORIZATION=f"Bearer {raw}").status_code == 200
    assert advice_runs_request() == 1
    (run,) = WhatIfRun.objects.filter(kind=RunKind.LEVERS)
    assert run.pipeline_id == read.pk
    assert "changes" not in run.params
