"""Fit check on hand-made traces: shares over budget, inconsistent allocation, suggestions."""

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apps.pipelines.models import Pipeline, Stage
from apps.pipelines.services import stage_budgets_set
from apps.rollups.selectors.fit import PipelineFit, StageFit, pipeline_fit, pipeline_fit_recent
from apps.rollups.selectors.fit_plans import FIT, KEEP, TRACES
from apps.rollups.selectors.fit_suggestions import suggest_budgets
from tests.builders.configuration import make_pipeline, make_stage
from tests.builders.evaluation_rollups import T0, make_sample, make_trace, ns_at
from tests.conftest import TeamWorld
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


def set_e2e(rag: Rag, p95: int) -> None:
    Pipeline.objects.filter(pk=rag.pipeline.pk).update(budget_p95_ms=p95)
    rag.pipeline.refresh_from_db()


def test_an_end_to_end_budget_the_stages_cannot_meet_is_said_with_one_that_they_can(
    rag: Rag,
) -> None:
    add_traffic(rag)
    fit = pipeline_fit(pipeline=rag.pipeline, now=NOW)
    stages = by_slug(fit)

    # U 800 + retrieval 360 + generation 525 on the path (rerank is off it) > 1000.
    assert (fit.met, fit.needed_ms) == (False, 1685.0)
    # Never below observed: observed + 10 % rounded up to 10 ms (5 ms under 200).
    assert [stages[s].suggested_ms for s in ("retrieval", "generation", "rerank")] == [
        400,  # 396
        580,  # 577.5
        55,  # 55
    ]
    # What they add up to on the path, 800 + 400 + 580, over the observed 1055 + 10 %.
    assert fit.suggested_e2e_ms == 1780
    traces, _keep = fit.plans
    assert (traces.kind, traces.e2e_ms, traces.over) == (TRACES, 1780, [])
    assert traces.stage_ms == {rag.retrieval.pk: 400, rag.generation.pk: 580, rag.rerank.pk: 55}


def test_keeping_the_end_to_end_budget_shows_targets_below_observed_and_says_so(
    rag: Rag,
) -> None:
    add_traffic(rag)
    fit = pipeline_fit(pipeline=rag.pipeline, now=NOW)
    stages = by_slug(fit)

    # A = 1000 - 800 untracked, D = 396 + 577.5 on the path: k = 200 / 973.5.
    scale = 200 / 973.5
    assert fit.scale == pytest.approx(scale)
    assert 396 * scale == pytest.approx(81.355, abs=1e-3)
    assert 577.5 * scale == pytest.approx(118.644, abs=1e-3)
    assert [stages[s].target_ms for s in ("retrieval", "generation", "rerank")] == [80, 115, 55]
    assert stages["retrieval"].target_below_observed_ms == 280.0
    assert stages["generation"].target_below_observed_ms == 410.0
    assert stages["rerank"].target_below_observed_ms is None
    keep = fit.plans[1]
    assert (keep.kind, keep.e2e_ms) == (KEEP, None)
    # Everything it leaves over budget was over already: it turns nothing red.
    over = [(o.name, o.observed_ms, o.budget_ms, o.already) for o in keep.over]
    assert over == [
        ("Retrieval", 360.0, 80, True),
        ("Generation", 525.0, 115, True),
        ("End to end", 1055.0, 1000, True),
    ]
    assert keep.newly_over == []


def test_apply_names_the_stages_it_would_turn_red(rag: Rag) -> None:
    Stage.objects.filter(pk__in=[rag.retrieval.pk, rag.generation.pk]).update(budget_ms=1000)
    add_traffic(rag)
    fit = pipeline_fit(pipeline=rag.pipeline, now=NOW)
    keep = next(plan for plan in fit.plans if plan.kind == KEEP)
    assert [(o.name, o.already) for o in keep.newly_over] == [
        ("Retrieval", False),
        ("Generation", False),
    ]
    assert [o.name for o in keep.still_over] == ["End to end"]
    traces = next(plan for plan in fit.plans if plan.kind == TRACES)
    assert traces.over == []


def test_a_budget_met_by_a_narrow_margin_eats_into_headroom_never_below_observed(
    rag: Rag,
) -> None:
    set_e2e(rag, 1700)
    add_traffic(rag)
    fit = pipeline_fit(pipeline=rag.pipeline, now=NOW)
    stages = by_slug(fit)

    # Needed 1685 <= 1700 and the observed 1055 within it, but 800 + 400 + 580 is not:
    # A = 900, D = 973.5, k = 0.9245: retrieval 366.1 -> 360, generation 533.9 -> 530.
    assert (fit.met, fit.suggested_e2e_ms) == (True, None)
    assert fit.scale == pytest.approx(900 / 973.5)
    assert [stages[s].suggested_ms for s in ("retrieval", "generation", "rerank")] == [
        360,
        530,
        55,
    ]
    assert all(s.target_ms is None for s in fit.stages)
    (plan,) = fit.plans
    assert (plan.kind, plan.e2e_ms, plan.over) == (FIT, None, [])
    assert 360 + 530 <= 900


def test_budgets_that_fit_keep_observed_plus_headroom(rag: Rag) -> None:
    set_e2e(rag, 5000)
    add_traffic(rag)
    fit = pipeline_fit(pipeline=rag.pipeline, now=NOW)
    stages = by_slug(fit)

    assert (fit.scale, fit.met) == (1.0, True)
    # 5 s is more than 2**31 ns: the comparison must not overflow into "no traces".
    assert (fit.traces, fit.over_budget, fit.inconsistent) == (20, 0, 0)
    assert [stages[s].suggested_ms for s in ("retrieval", "generation", "rerank")] == [
        400,
        580,
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


def test_orchestration_alone_over_budget_leaves_no_targets() -> None:
    found = suggest_budgets(
        observed_ms={1: 100.0, 2: 200.0},
        critical_fraction={1: 1.0, 2: 0.5},
        budget_ms=500,
        untracked_ms=600.0,
        e2e_observed_ms=720.0,
    )
    assert (found.stage_ms, found.target_ms, found.scale, found.met) == (
        {1: 110, 2: 220}, {}, None, False,
    )  # fmt: skip
    # 600 + 110 + 0.5 x 220 = 820 on the path, over 720 x 1.1 = 792.
    assert (found.needed_ms, found.e2e_ms) == (800.0, 820)


def test_a_partly_parallel_stage_gives_up_only_its_on_path_share() -> None:
    found = suggest_budgets(
        observed_ms={1: 1000.0, 2: 1000.0},
        critical_fraction={1: 1.0, 2: 0.5},
        budget_ms=1000,
        untracked_ms=10.0,
        e2e_observed_ms=1900.0,
    )
    # D = 1100 + 550 = 1650, A = 990, k = 0.6: stage 2 keeps its 550 ms off the path.
    assert found.scale == pytest.approx(0.6)
    assert found.target_ms == {1: 660, 2: 550 + 330}
    assert found.stage_ms == {1: 1100, 2: 1100}
    # 10 + 1100 + 550 = 1660 on the path; 1900 x 1.1 = 2090 observed: 2100 in 50 ms steps.
    assert found.e2e_ms == 2100


def test_without_an_end_to_end_budget_suggestions_cover_the_observed() -> None:
    found = suggest_budgets(
        observed_ms={1: 17.3, 2: 0.4}, critical_fraction={1: 1.0}, budget_ms=None,
        untracked_ms=0.0,
    )  # fmt: skip
    # 19.03 -> 20 (1 ms steps under 20 ms); 0.44 -> 1, the smallest budget.
    assert (found.stage_ms, found.met, found.e2e_ms) == ({1: 20, 2: 1}, None, None)


observed = st.dictionaries(
    st.integers(1, 6), st.floats(0.01, 50_000, allow_nan=False), min_size=1, max_size=6
)


@given(
    observed=observed,
    fractions=st.lists(st.floats(0, 1), min_size=6, max_size=6),
    budget=st.integers(1, 100_000),
    untracked=st.floats(0, 50_000),
    e2e=st.floats(0, 200_000),
)
def test_suggestions_never_go_below_observed_and_targets_fit_what_is_left(
    observed: dict[int, float], fractions: list[float], budget: int, untracked: float, e2e: float
) -> None:
    fraction = {stage_id: fractions[stage_id - 1] for stage_id in observed}
    found = suggest_budgets(
        observed_ms=observed, critical_fraction=fraction, budget_ms=budget,
        untracked_ms=untracked, e2e_observed_ms=e2e,
    )  # fmt: skip
    assert all(found.stage_ms[i] >= o for i, o in observed.items())
    needed = untracked + sum(fraction[i] * o for i, o in observed.items())
    assert found.met == (needed <= budget and e2e <= budget)
    if found.met:
        assert found.e2e_ms is None
        assert found.target_ms == {}
        return
    assert found.e2e_ms is not None
    assert found.e2e_ms >= e2e
    needs = untracked + sum(fraction[i] * o * 1.1 for i, o in observed.items())
    assert found.e2e_ms >= needs * (1 - 1e-12)
    if found.target_ms:
        # A target keeps its part beside the critical path, (1 - f) x observed x 1.1;
        # the rest is its part on the path, and those parts fit what the budget leaves
        # (rounded down, but never under 1 ms).
        beside = {i: (1 - fraction[i]) * o * 1.1 for i, o in observed.items()}
        on_path = sum(t - beside[i] for i, t in found.target_ms.items())
        assert on_path <= budget - untracked + len(observed)


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
