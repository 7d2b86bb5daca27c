"""Fit check on hand-made traces: shares over budget, inconsistent allocation, suggestions."""

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

from apps.pipelines.models import Pipeline, Stage
from apps.pipelines.services import stage_budgets_set
from apps.rollups.selectors.fit import (
    PipelineFit,
    StageFit,
    pipeline_fit,
    pipeline_fit_recent,
    suggest_budgets,
)
from tests.conftest import TeamWorld
from tests.factories import make_pipeline, make_stage
from tests.rollups.evaluation_data import T0, make_sample, make_trace, ns_at
from tests.timing import DAY_S

NOW = T0 + timedelta(days=8)


@dataclass
class Rag:
    pipeline: Pipeline
    retrieval: Stage
    generation: Stage
    rerank: Stage


@pytest.fixture
def rag(world: TeamWorld) -> Rag:
    pipeline = make_pipeline(world.team, "rag-chat", budget={"p50": 500, "p95": 1000})
    retrieval = make_stage(pipeline, "retrieval", budget_ms=300)
    generation = make_stage(pipeline, "generation", budget_ms=500, budget_percentile="p90")
    rerank = make_stage(pipeline, "rerank", budget_ms=None)
    return Rag(pipeline, retrieval, generation, rerank)


def add_traffic(rag: Rag, *, day: float = 6) -> None:
    """20 traces: retrieval 0..380 ms, generation 100..575 ms in sequence, rerank beside them.

    Traces 3 and 5 spend 700 ms more in orchestration: every stage within budget,
    the end-to-end time over it.
    """
    for i in range(20):
        retrieval, generation = 20 * i, 100 + 25 * i
        untracked = 100 + (700 if i in (3, 5) else 0)
        trace = make_trace(
            rag.pipeline,
            start_ns=ns_at(day * DAY_S + i),
            duration_ms=retrieval + generation + untracked,
            untracked_ms=untracked,
        )
        make_sample(trace, rag.retrieval, retrieval)
        make_sample(trace, rag.generation, generation)
        if i % 2 == 0:
            make_sample(trace, rag.rerank, 50, critical_ms=0)


def by_slug(fit: PipelineFit) -> dict[str, StageFit]:
    return {stage_fit.stage.slug: stage_fit for stage_fit in fit.stages}


def test_shares_over_budget_against_the_expected_share(rag: Rag) -> None:
    add_traffic(rag)
    fit = pipeline_fit(pipeline=rag.pipeline, now=NOW)
    stages = by_slug(fit)

    assert fit.traces == 20
    retrieval = stages["retrieval"]
    assert (retrieval.runs, retrieval.over_budget) == (20, 4)  # 320..380 ms; 300 is within
    assert retrieval.share_over_budget == pytest.approx(0.2)
    assert retrieval.expected_share == pytest.approx(0.05)
    assert retrieval.observed_ms == 360.0  # rank ceil(0.95 x 20) = 19
    generation = stages["generation"]
    assert (generation.runs, generation.over_budget, generation.percentile) == (20, 3, "p90")
    assert generation.share_over_budget == pytest.approx(0.15)
    assert generation.expected_share == pytest.approx(0.1)
    assert generation.observed_ms == 525.0  # rank 18
    rerank = stages["rerank"]
    assert (rerank.runs, rerank.over_budget, rerank.share_over_budget) == (10, None, None)
    assert rerank.observed_ms == 50.0
    assert rerank.critical_fraction == 0.0


def test_every_stage_within_budget_yet_end_to_end_over_is_inconsistent(rag: Rag) -> None:
    add_traffic(rag)
    fit = pipeline_fit(pipeline=rag.pipeline, now=NOW)

    assert (fit.percentile, fit.budget_ms) == ("p95", 1000)
    # Over 1000 ms: traces 3 and 5 (orchestration) and 18, 19 (generation over budget).
    assert fit.over_budget == 4
    assert fit.share_over_budget == pytest.approx(0.2)
    assert fit.inconsistent == 2
    assert fit.share_inconsistent == pytest.approx(0.1)
    assert fit.observed_ms == 1055.0
    assert fit.untracked_ms == 800.0


def test_suggestions_cut_only_the_critical_path_to_fit_the_end_to_end_budget(rag: Rag) -> None:
    add_traffic(rag)
    fit = pipeline_fit(pipeline=rag.pipeline, now=NOW)
    stages = by_slug(fit)

    # A = 1000 - 800 untracked; D = 1.1 x 360 + 1.1 x 525 on the path; rerank is off it.
    scale = 200 / (1.1 * 360 + 1.1 * 525)
    assert fit.scale == pytest.approx(scale)
    assert stages["retrieval"].suggested_ms == round(396 * scale)
    assert stages["generation"].suggested_ms == round(577.5 * scale)
    assert stages["rerank"].suggested_ms == 55
    on_path = stages["retrieval"].suggested_ms + stages["generation"].suggested_ms
    assert abs(on_path - 200) <= 1


def test_budgets_that_fit_keep_observed_plus_headroom(rag: Rag) -> None:
    Pipeline.objects.filter(pk=rag.pipeline.pk).update(budget_p95_ms=5000)
    rag.pipeline.refresh_from_db()
    add_traffic(rag)
    fit = pipeline_fit(pipeline=rag.pipeline, now=NOW)
    stages = by_slug(fit)

    assert fit.scale == 1.0
    # 5 s is more than 2**31 ns: the comparison must not overflow into "no traces".
    assert (fit.traces, fit.over_budget, fit.inconsistent) == (20, 0, 0)
    assert [stages[s].suggested_ms for s in ("retrieval", "generation", "rerank")] == [
        396,
        578,
        55,
    ]


def test_only_complete_recent_traces_of_the_pipeline_count(rag: Rag, world: TeamWorld) -> None:
    add_traffic(rag)
    add_traffic(rag, day=0.5)  # older than 7 days before NOW
    incomplete = make_trace(
        rag.pipeline, start_ns=ns_at(6 * DAY_S), duration_ms=9000, incomplete=True
    )
    make_trace(rag.pipeline, start_ns=ns_at(6 * DAY_S), duration_ms=9000, finalized=False)
    assert incomplete.pk
    other = make_pipeline(world.team, "other", budget={"p95": 10})
    make_trace(other, start_ns=ns_at(6 * DAY_S), duration_ms=9000)

    fit = pipeline_fit(pipeline=rag.pipeline, now=NOW)

    assert fit.traces == 20
    assert fit.over_budget == 4
    assert by_slug(fit)["retrieval"].runs == 20


def test_a_pipeline_without_traffic_reports_no_numbers(world: TeamWorld) -> None:
    pipeline = make_pipeline(world.team, "quiet", budget={"p99": 3000})
    make_stage(pipeline, "retrieval", budget_ms=None)
    fit = pipeline_fit(pipeline=pipeline, now=NOW)

    assert (fit.traces, fit.percentile, fit.over_budget, fit.inconsistent) == (0, "p99", 0, 0)
    assert (fit.share_over_budget, fit.observed_ms, fit.scale) == (None, None, None)
    stage = fit.stages[0]
    assert (stage.runs, stage.observed_ms, stage.suggested_ms, stage.share_over_budget) == (
        0,
        None,
        None,
        None,
    )


def test_orchestration_alone_over_budget_leaves_nothing_to_fit() -> None:
    suggested, scale = suggest_budgets(
        observed_ms={1: 100.0, 2: 200.0},
        critical_fraction={1: 1.0, 2: 0.5},
        budget_ms=500,
        untracked_ms=600.0,
    )
    assert (suggested, scale) == ({1: 110, 2: 220}, None)


def test_a_partly_parallel_stage_gives_up_only_its_on_path_share() -> None:
    suggested, scale = suggest_budgets(
        observed_ms={1: 1000.0, 2: 1000.0},
        critical_fraction={1: 1.0, 2: 0.5},
        budget_ms=1000,
        untracked_ms=10.0,
    )
    # D = 1100 + 550 = 1650, A = 990, k = 0.6: stage 2 keeps its 550 ms off the path.
    assert scale == pytest.approx(0.6)
    assert suggested == {1: 660, 2: 550 + 330}


def test_the_week_is_scanned_once_a_minute_and_again_when_a_budget_changes(
    rag: Rag, clean_cache: None, django_assert_max_num_queries: Any
) -> None:
    add_traffic(rag)
    assert pipeline_fit(pipeline=rag.pipeline, now=NOW).traces == 20
    first = pipeline_fit_recent(pipeline=rag.pipeline, now=NOW)

    # Asked again within the minute: the stages are read, the week is not.
    with django_assert_max_num_queries(1):
        again = pipeline_fit_recent(pipeline=rag.pipeline, now=NOW)
    assert again.traces == first.traces
    assert by_slug(again)["retrieval"].budget_ms == 300

    stage_budgets_set(pipeline=rag.pipeline, budgets_ms={rag.retrieval.pk: 250})
    changed = pipeline_fit_recent(pipeline=rag.pipeline, now=NOW)
    assert by_slug(changed)["retrieval"].budget_ms == 250
    assert by_slug(changed)["retrieval"].over_budget != by_slug(first)["retrieval"].over_budget
