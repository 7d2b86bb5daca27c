"""Prompt checks between ticks: they open violations at once and never count toward closing."""

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from apps.pipelines.models import Pipeline, Stage
from apps.rollups.models import BudgetEvaluation, RollupBucket, Violation
from apps.rollups.services.evaluation import (
    PROMPT_CHECK_INTERVAL_S,
    budgets_check_promptly,
    budgets_evaluate,
)
from tests.builders.configuration import make_pipeline, make_stage
from tests.builders.evaluation_rollups import at, put_rollup
from tests.conftest import TeamWorld

UNDER = np.linspace(100, 300, 20)  # 20 values per 10 s bucket, all under a 350 ms budget
FIELDS = (
    "observed_ms", "peak_ms", "consecutive_ok", "opened_at", "closed_at", "sample_count",
    "last_evaluated_at",
)  # fmt: skip

pytestmark = pytest.mark.usefixtures("clean_cache")


def over(value: float) -> np.ndarray:
    return np.full(20, value)


@dataclass
class Rag:
    pipeline: Pipeline
    retrieval: Stage

    def put(self, tick: int, values: np.ndarray) -> None:
        put_rollup(self.pipeline, self.retrieval, at(tick * 10), values)

    def tick(self, seconds: float) -> Any:
        return budgets_evaluate(now=at(seconds))

    def check(self, seconds: float) -> Any:
        return budgets_check_promptly(pipeline_ids=[self.pipeline.pk], now=at(seconds))

    def violation(self) -> dict[str, Any]:
        return Violation.objects.filter(pipeline=self.pipeline).values(*FIELDS).get()

    def tick_mark(self) -> Any:
        return BudgetEvaluation.objects.get(pipeline=self.pipeline).evaluated_at


@pytest.fixture
def rag(world: TeamWorld) -> Rag:
    pipeline = make_pipeline(world.team, "rag-chat", budget={"p95": 2500})
    # The shortest window keeps the scripts short: six 10 s buckets.
    Pipeline.objects.filter(pk=pipeline.pk).update(evaluation_window_s=60)
    pipeline.refresh_from_db()
    return Rag(pipeline, make_stage(pipeline, "retrieval", budget_ms=350))


def steady(rag: Rag, ticks: int) -> None:
    """``ticks`` 10 s buckets under budget, each evaluated by its tick 5 s in."""
    for tick in range(ticks):
        rag.put(tick, UNDER)
        rag.tick(tick * 10 + 5)


def test_a_prompt_check_opens_a_violation_before_the_next_tick(rag: Rag) -> None:
    steady(rag, 6)
    rag.put(6, over(600))

    result = rag.check(62)

    assert (result.pipelines, result.opened) == (1, 1)
    violation = Violation.objects.get()
    assert (violation.stage, violation.percentile) == (rag.retrieval, "p95")
    assert violation.opened_at == at(62)
    assert violation.observed_ms == pytest.approx(600, rel=0.01)
    assert violation.sample_count == 120
    # The tick of that period still runs, and follows the violation instead of opening one.
    assert rag.tick_mark() == at(50)
    assert rag.tick(65).pipelines == 1
    assert Violation.objects.count() == 1
    assert rag.violation()["last_evaluated_at"] == at(65)


def test_a_prompt_check_follows_an_open_violation_up_to_its_new_peak(rag: Rag) -> None:
    steady(rag, 6)
    rag.put(6, over(600))
    rag.tick(65)
    rag.put(7, over(900))

    result = rag.check(72)

    assert (result.opened, result.updated) == (0, 1)
    state = rag.violation()
    assert state["opened_at"] == at(65)
    assert state["observed_ms"] == pytest.approx(900, rel=0.01)
    assert state["peak_ms"] == pytest.approx(900, rel=0.01)
    assert state["last_evaluated_at"] == at(72)


def open_then_one_tick_under(rag: Rag) -> None:
    """A violation opened at tick 6; the slow bucket leaves the 60 s window at tick 12,
    the first tick under budget (ticks 12, 13, 14 close it)."""
    steady(rag, 6)
    rag.put(6, over(600))
    rag.tick(65)
    for tick in range(7, 13):
        rag.put(tick, UNDER)
        rag.tick(tick * 10 + 5)


def test_a_prompt_check_under_budget_never_counts_toward_closing(rag: Rag) -> None:
    open_then_one_tick_under(rag)
    assert rag.violation()["consecutive_ok"] == 1

    before = rag.violation()
    for seconds in (126, 128, 130, 132, 134):
        assert rag.check(seconds).pipelines == 1
        assert rag.violation() == before

    rag.put(13, UNDER)
    rag.tick(135)
    assert rag.violation()["consecutive_ok"] == 2
    assert rag.violation()["closed_at"] is None
    rag.put(14, UNDER)
    rag.tick(145)
    assert rag.violation()["closed_at"] == at(145)


def test_a_prompt_check_over_budget_starts_the_count_under_budget_again(rag: Rag) -> None:
    open_then_one_tick_under(rag)
    assert rag.violation()["consecutive_ok"] == 1

    # Slow traces of the current bucket arrive after its tick: the budget is broken again.
    RollupBucket.objects.filter(
        pipeline_id=rag.pipeline.pk, resolution=10, bucket_start=at(120)
    ).delete()
    rag.put(12, np.concatenate([UNDER, over(800)]))
    rag.check(127)

    state = rag.violation()
    assert state["consecutive_ok"] == 0
    assert state["peak_ms"] == pytest.approx(800, rel=0.01)
    assert state["closed_at"] is None


def test_a_prompt_check_leaves_a_removed_budgets_violation_to_the_tick(rag: Rag) -> None:
    steady(rag, 6)
    rag.put(6, over(600))
    rag.tick(65)
    Stage.objects.filter(pk=rag.retrieval.pk).update(budget_ms=None)

    assert rag.check(67).pipelines == 1
    assert rag.violation()["closed_at"] is None

    rag.tick(75)
    assert rag.violation()["closed_at"] == at(75)


def test_prompt_checks_never_take_the_ticks_turn(rag: Rag) -> None:
    steady(rag, 3)
    mark = rag.tick_mark()

    for seconds in (31, 33, 35, 37):
        rag.check(seconds)

    assert rag.tick_mark() == mark == at(20)
    assert rag.tick(35).pipelines == 1
    assert rag.tick(37).skipped == 1


def test_one_pipeline_is_checked_once_per_period(rag: Rag, world: TeamWorld) -> None:
    other = make_pipeline(world.team, "search", budget={"p95": 10})
    steady(rag, 6)
    assert rag.check(60).pipelines == 1
    rag.put(6, over(600))
    put_rollup(other, None, at(60), over(600))

    # The same period: rag-chat was checked already, search was not.
    later = 60 + PROMPT_CHECK_INTERVAL_S * 0.75
    result = budgets_check_promptly(pipeline_ids=[rag.pipeline.pk, other.pk], now=at(later))

    assert (result.pipelines, result.skipped) == (1, 1)
    assert list(Violation.objects.values_list("pipeline", flat=True)) == [other.pk]
    assert rag.check(60 + PROMPT_CHECK_INTERVAL_S).opened == 1


def test_no_verdict_under_the_minimum_sample_count(rag: Rag) -> None:
    # 3 slow values per bucket: 18 in a full window, under the default minimum of 20.
    for tick in range(8):
        rag.put(tick, np.full(3, 5000.0))
    assert rag.check(75).pipelines == 1
    assert not Violation.objects.exists()

    # The window of tick 7 holds buckets 2 to 7: 18 samples.
    Pipeline.objects.filter(pk=rag.pipeline.pk).update(min_samples=18)
    rag.check(77)
    assert Violation.objects.get().sample_count == 18


def test_pipelines_gone_or_unknown_are_skipped_quietly(rag: Rag) -> None:
    result = budgets_check_promptly(pipeline_ids=[rag.pipeline.pk + 1000], now=at(5))
    assert (result.pipelines, result.opened) == (0, 0)
