"""Budget evaluation on scripted traffic: violations open, track the peak, close with hysteresis."""

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from apps.pipelines.models import Pipeline, Stage
from apps.rollups.models import BudgetEvaluation, Violation
from apps.rollups.selectors.budget_window import evaluation_window
from apps.rollups.services.evaluation import budgets_evaluate
from tests.builders.configuration import make_pipeline, make_stage
from tests.builders.evaluation_rollups import at, hex_id, make_sample, make_trace, ns_at, put_rollup
from tests.conftest import TeamWorld

UNDER = np.linspace(100, 300, 20)  # 20 values per 10 s bucket, all under a 350 ms budget


@dataclass
class Rag:
    pipeline: Pipeline
    retrieval: Stage
    generation: Stage


@pytest.fixture
def rag(world: TeamWorld) -> Rag:
    pipeline = make_pipeline(world.team, "rag-chat", budget={"p95": 2500, "p99": 4000})
    # The shortest window keeps the scripts short: six 10 s buckets.
    Pipeline.objects.filter(pk=pipeline.pk).update(evaluation_window_s=60)
    pipeline.refresh_from_db()
    retrieval = make_stage(pipeline, "retrieval", budget_ms=350)
    generation = make_stage(pipeline, "generation", budget_ms=None)
    return Rag(pipeline, retrieval, generation)


def run_script(
    rag: Rag, script: list[np.ndarray], *, stage: Stage | str | None = "retrieval"
) -> list[list[Any]]:
    """One 10 s bucket per tick (``stage`` None: end to end), evaluated in the middle of it.

    Returns the pipeline's violations after each tick.
    """
    scope = rag.retrieval if stage == "retrieval" else stage
    assert not isinstance(scope, str)
    states = []
    for tick, values in enumerate(script):
        if len(values):
            put_rollup(rag.pipeline, scope, at(tick * 10), values)
        budgets_evaluate(now=at(tick * 10 + 5))
        states.append(
            list(
                Violation.objects.filter(pipeline=rag.pipeline).order_by("id").values(
                    "stage_id", "percentile", "observed_ms", "peak_ms", "consecutive_ok",
                    "opened_at", "closed_at", "sample_count", "last_evaluated_at",
                )
            )
        )  # fmt: skip
    return states


def over(value: float) -> np.ndarray:
    return np.full(20, value)


def test_a_stage_violation_opens_tracks_its_peak_and_closes_after_three_evaluations_under(
    rag: Rag,
) -> None:
    # Ticks 0-5 under, 6-8 over (600, 900, 700 ms), then under again. The window holds
    # 6 buckets, so p95 (rank 114 of 120) stays on the slowest bucket still inside it.
    script = [UNDER] * 6 + [over(600), over(900), over(700)] + [UNDER] * 10
    states = run_script(rag, script)

    assert all(state == [] for state in states[:6])
    opened = states[6]
    assert len(opened) == 1
    assert opened[0]["stage_id"] == rag.retrieval.pk
    assert opened[0]["percentile"] == "p95"
    assert opened[0]["opened_at"] == at(65)
    assert opened[0]["observed_ms"] == pytest.approx(600, rel=0.01)
    assert opened[0]["sample_count"] == 120

    # Tick 11's window is the minute [60 s, 120 s): read from its minute bucket, once.
    assert [state[0]["sample_count"] for state in states[6:14]] == [120] * 8
    assert [state[0]["last_evaluated_at"] for state in states[6:14]] == [
        at(tick * 10 + 5) for tick in range(6, 14)
    ]
    observed = [state[0]["observed_ms"] for state in states[6:14]]
    assert observed == pytest.approx([600, 900, 900, 900, 900, 900, 900, 700], rel=0.01)
    assert [state[0]["peak_ms"] for state in states[7:14]] == pytest.approx([900] * 7, rel=0.01)
    # Tick 14 is the first whose window holds no slow bucket: three evaluations under close it.
    assert [state[0]["consecutive_ok"] for state in states[12:17]] == [0, 0, 1, 2, 3]
    assert all(state[0]["closed_at"] is None for state in states[6:16])
    assert states[16][0]["closed_at"] == at(165)
    assert states[18] == states[16]


def test_back_over_budget_before_closing_resets_the_count_and_keeps_one_violation(
    rag: Rag,
) -> None:
    script = [UNDER] * 6 + [over(600)] + [UNDER] * 7 + [over(800)] + [UNDER] * 2
    states = run_script(rag, script)

    violations = Violation.objects.filter(pipeline=rag.pipeline)
    assert violations.count() == 1
    # The slow bucket of tick 6 leaves the window at tick 12.
    assert [state[0]["consecutive_ok"] for state in states[11:15]] == [0, 1, 2, 0]
    assert violations.get().closed_at is None
    assert violations.get().peak_ms == pytest.approx(800, rel=0.01)


def test_a_new_violation_opens_after_the_previous_one_closed(rag: Rag) -> None:
    script = [UNDER] * 6 + [over(600)] + [UNDER] * 9 + [over(500)]
    run_script(rag, script)

    first, second = Violation.objects.filter(pipeline=rag.pipeline).order_by("id")
    assert first.closed_at is not None
    assert second.closed_at is None
    assert second.opened_at == at(165)
    assert second.peak_ms == pytest.approx(500, rel=0.01)


def test_no_verdict_under_the_minimum_sample_count(rag: Rag) -> None:
    # 3 slow values per bucket: 18 in a full window, under the default minimum of 20.
    run_script(rag, [np.full(3, 5000.0)] * 8)
    assert not Violation.objects.exists()

    # The window of tick 8 holds buckets 3 to 7: 15 samples.
    Pipeline.objects.filter(pk=rag.pipeline.pk).update(min_samples=15)
    budgets_evaluate(now=at(8 * 10 + 5))
    assert Violation.objects.get().sample_count == 15


def test_an_open_violation_waits_while_traffic_is_under_the_minimum(rag: Rag) -> None:
    script = [over(600)] * 2 + [np.full(1, 100.0)] * 8 + [UNDER] * 6
    states = run_script(rag, script)

    assert states[6][0]["sample_count"] == 25
    # From tick 7 the window holds 6 samples: no verdict, nothing moves.
    assert states[9][0] == states[6][0]
    assert states[9][0]["consecutive_ok"] == 0
    assert states[9][0]["closed_at"] is None
    assert states[-1][0]["closed_at"] is not None


def test_the_end_to_end_scope_opens_per_budgeted_percentile(rag: Rag) -> None:
    # 100 values per bucket: p95 over 2500 ms, p99 over 4000 ms only in the second script.
    slow_tail = np.concatenate([np.full(90, 1000.0), np.full(10, 3000.0)])
    run_script(rag, [slow_tail] * 3, stage=None)
    violation = Violation.objects.get()
    assert violation.stage is None
    assert violation.percentile == "p95"
    assert violation.budget_ms == 2500
    assert violation.observed_ms == pytest.approx(3000, rel=0.01)

    put_rollup(rag.pipeline, None, at(30), np.full(100, 5000.0))
    budgets_evaluate(now=at(35))
    assert set(Violation.objects.values_list("percentile", flat=True)) == {"p95", "p99"}


def test_unbudgeted_stages_are_not_evaluated(rag: Rag) -> None:
    run_script(rag, [over(10_000)] * 3, stage=rag.generation)
    assert not Violation.objects.exists()


def test_examples_are_the_slowest_traces_of_the_window_for_the_stage(rag: Rag) -> None:
    traces = []
    for i, wall_ms in enumerate([400, 900, 650, 120, 800, 700, 990, 300]):
        trace = make_trace(rag.pipeline, start_ns=ns_at(i), duration_ms=wall_ms + 50)
        make_sample(trace, rag.retrieval, wall_ms)
        traces.append(trace)
    # Slower, but a minute before the window.
    old = make_trace(rag.pipeline, start_ns=ns_at(-70), duration_ms=5000)
    make_sample(old, rag.retrieval, 5000)
    put_rollup(rag.pipeline, rag.retrieval, at(0), over(600))

    budgets_evaluate(now=at(5))

    violation = Violation.objects.get()
    expected = [traces[i] for i in (6, 1, 4, 5, 2)]
    assert violation.example_trace_ids == [hex_id(t) for t in expected]


def test_end_to_end_examples_are_the_longest_complete_traces(rag: Rag) -> None:
    durations = [1000, 4000, 3500, 2600, 2000, 5000, 3000]
    traces = [
        make_trace(rag.pipeline, start_ns=ns_at(i), duration_ms=d) for i, d in enumerate(durations)
    ]
    make_trace(rag.pipeline, start_ns=ns_at(1), duration_ms=9000, incomplete=True)
    put_rollup(rag.pipeline, None, at(0), np.full(40, 3000.0))

    budgets_evaluate(now=at(5))

    violation = Violation.objects.get(stage=None, percentile="p95")
    assert violation.example_trace_ids == [hex_id(traces[i]) for i in (5, 1, 2, 6, 3)]


def test_examples_follow_the_peak(rag: Rag) -> None:
    first = make_trace(rag.pipeline, start_ns=ns_at(1), duration_ms=700)
    make_sample(first, rag.retrieval, 600)
    put_rollup(rag.pipeline, rag.retrieval, at(0), over(600))
    budgets_evaluate(now=at(5))
    second = make_trace(rag.pipeline, start_ns=ns_at(11), duration_ms=1000)
    make_sample(second, rag.retrieval, 900)
    put_rollup(rag.pipeline, rag.retrieval, at(10), over(900))
    budgets_evaluate(now=at(15))

    assert Violation.objects.get().example_trace_ids == [hex_id(second), hex_id(first)]


def test_running_twice_in_one_tick_counts_once(rag: Rag) -> None:
    run_script(rag, [over(600)] * 2)
    put_rollup(rag.pipeline, rag.retrieval, at(20), UNDER)
    put_rollup(rag.pipeline, rag.retrieval, at(30), np.full(2000, 100.0))

    first = budgets_evaluate(now=at(35))
    second = budgets_evaluate(now=at(39))

    assert (first.pipelines, second.pipelines, second.skipped) == (1, 0, 1)
    assert Violation.objects.get().consecutive_ok == 1
    assert BudgetEvaluation.objects.get(pipeline=rag.pipeline).evaluated_at == at(30)


def test_a_budget_removed_closes_its_open_violation(rag: Rag) -> None:
    run_script(rag, [over(600)] * 2)
    Stage.objects.filter(pk=rag.retrieval.pk).update(budget_ms=None)

    budgets_evaluate(now=at(25))

    assert Violation.objects.get().closed_at == at(25)


def test_a_new_budget_value_is_recorded_on_the_open_violation(rag: Rag) -> None:
    run_script(rag, [over(600)] * 2)
    Stage.objects.filter(pk=rag.retrieval.pk).update(budget_ms=500)

    budgets_evaluate(now=at(25))

    assert Violation.objects.get().budget_ms == 500


def test_the_window_ends_with_the_bucket_holding_now() -> None:
    window = evaluation_window(now=at(127.5), window_s=300)
    assert (window.start, window.end) == (at(-170), at(130))
