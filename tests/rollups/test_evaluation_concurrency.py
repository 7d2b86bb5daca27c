"""Evaluations of one pipeline at once take turns, each tick counts once; constraints back it."""

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from django.core.cache import cache
from django.db import IntegrityError, connection, transaction

from apps.rollups.models import Violation
from apps.rollups.services.evaluation import (
    EvaluationResult,
    budgets_check_promptly,
    budgets_evaluate,
)
from tests.builders.configuration import make_pipeline, make_stage
from tests.builders.evaluation_rollups import at, put_rollup
from tests.conftest import TeamWorld


def _concurrently(now_seconds: float, runs: int = 2) -> list[EvaluationResult]:
    barrier = threading.Barrier(runs)
    results: list[EvaluationResult] = []
    errors: list[BaseException] = []

    def evaluate() -> None:
        try:
            barrier.wait()
            results.append(budgets_evaluate(now=at(now_seconds)))
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=evaluate) for _ in range(runs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    return results


@pytest.mark.django_db(transaction=True)
def test_concurrent_runs_of_one_tick_open_one_violation_and_count_each_tick_once(
    world: TeamWorld,
) -> None:
    pipeline = make_pipeline(world.team, "rag-chat", budget={"p95": 2500})
    stage = make_stage(pipeline, "retrieval", budget_ms=350)
    put_rollup(pipeline, stage, at(0), np.full(40, 600.0))
    put_rollup(pipeline, None, at(0), np.full(40, 3000.0))

    opening = _concurrently(5, runs=3)

    assert sorted(r.pipelines for r in opening) == [0, 0, 1]
    assert sum(r.opened for r in opening) == 2
    assert Violation.objects.filter(closed_at__isnull=True).count() == 2

    put_rollup(pipeline, stage, at(10), np.full(4000, 100.0))
    put_rollup(pipeline, None, at(10), np.full(4000, 100.0))
    for tick in (1, 2):
        results = _concurrently(tick * 10 + 5, runs=3)
        assert sum(r.pipelines for r in results) == 1
    assert set(Violation.objects.values_list("consecutive_ok", flat=True)) == {2}
    assert not Violation.objects.filter(closed_at__isnull=False).exists()


@pytest.mark.parametrize("scope", ["stage", "end to end"])
def test_the_database_refuses_a_second_open_violation_for_one_scope(
    world: TeamWorld, scope: str
) -> None:
    pipeline = make_pipeline(world.team, "rag-chat", budget={"p95": 2500})
    stage = make_stage(pipeline, "retrieval", budget_ms=350) if scope == "stage" else None
    fields: dict[str, Any] = {
        "team": world.team, "pipeline": pipeline, "stage": stage, "percentile": "p95",
        "budget_ms": 350, "window_s": 300, "observed_ms": 400.0, "peak_ms": 400.0,
        "sample_count": 20, "opened_at": at(0), "last_evaluated_at": at(0),
    }  # fmt: skip
    Violation.objects.create(**fields, closed_at=at(5))
    Violation.objects.create(**fields)
    with pytest.raises(IntegrityError), transaction.atomic():
        Violation.objects.create(**fields)
    Violation.objects.create(**{**fields, "percentile": "p99"})
    assert Violation.objects.filter(closed_at__isnull=True).count() == 2


@pytest.mark.django_db(transaction=True)
def test_a_prompt_check_and_a_tick_at_once_open_one_violation(world: TeamWorld) -> None:
    cache.clear()  # the prompt check's once-per-period claims
    pipeline = make_pipeline(world.team, "rag-chat", budget={"p95": 2500})
    stage = make_stage(pipeline, "retrieval", budget_ms=350)
    errors: list[BaseException] = []

    def run(evaluate: Callable[..., object], barrier: threading.Barrier, **kwargs: Any) -> None:
        try:
            barrier.wait()
            evaluate(**kwargs)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
        finally:
            connection.close()

    for tick in range(5):
        put_rollup(pipeline, stage, at(tick * 10), np.full(40, 600.0))
        now = at(tick * 10 + 5)
        barrier = threading.Barrier(2)
        threads = [
            threading.Thread(target=run, args=(budgets_evaluate, barrier), kwargs={"now": now}),
            threading.Thread(
                target=run,
                args=(budgets_check_promptly, barrier),
                kwargs={"now": now, "pipeline_ids": [pipeline.pk]},
            ),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        assert Violation.objects.filter(closed_at__isnull=True).count() == 1
        Violation.objects.all().delete()
