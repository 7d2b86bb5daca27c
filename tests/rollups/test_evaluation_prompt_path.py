"""A rollup pass gets the budgets of the pipelines it rewrote checked, through the task queue."""

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from django.conf import settings
from django.utils import timezone

from apps.analysis.models import DirtyBucket
from apps.analysis.services.dirty_buckets import dirty_buckets_mark
from apps.pipelines.models import Pipeline, Stage
from apps.rollups.models import BudgetEvaluation, Violation
from apps.rollups.selectors.budget_window import evaluation_tick
from apps.rollups.tasks import check_budgets_promptly, process_dirty_rollups
from tests.builders.configuration import make_pipeline, make_stage
from tests.builders.evaluation_rollups import make_sample, make_trace, put_rollup
from tests.conftest import TeamWorld
from tests.processes import celery_worker, wait_for
from tests.timing import S

pytestmark = pytest.mark.usefixtures("clean_cache")

NEVER = datetime(1970, 1, 1, tzinfo=UTC)


def rag_pipeline(world: TeamWorld, slug: str) -> tuple[Pipeline, Stage]:
    pipeline = make_pipeline(world.team, slug, budget={"p95": 2500})
    return pipeline, make_stage(pipeline, "retrieval", budget_ms=350)


def slow_retrievals_just_finalized(pipeline: Pipeline, stage: Stage, count: int = 30) -> None:
    """Traces of the last half minute whose retrieval took 600 ms, their buckets marked
    dirty as long ago as the worker's passes wait before rewriting them."""
    now_ns = int(timezone.now().timestamp() * S)
    starts = [now_ns - (30 - i) * S for i in range(count)]
    for start_ns in starts:
        make_sample(make_trace(pipeline, start_ns=start_ns, duration_ms=700), stage, 600)
    dirty_buckets_mark((pipeline.pk, start_ns) for start_ns in starts)
    settled = timezone.now() - timedelta(seconds=settings.ROLLUP_SETTLE_SECONDS)
    DirtyBucket.objects.filter(pipeline_id=pipeline.pk).update(dirty_since=settled)


def test_a_rollup_pass_checks_only_the_pipelines_it_rewrote(
    world: TeamWorld, eager: None, django_capture_on_commit_callbacks: object
) -> None:
    busy, busy_retrieval = rag_pipeline(world, "rag-chat")
    # Over budget in its rollups, but with nothing new: left to the tick.
    quiet, quiet_retrieval = rag_pipeline(world, "search")
    put_rollup(quiet, quiet_retrieval, evaluation_tick(timezone.now()), np.full(40, 900.0))
    slow_retrievals_just_finalized(busy, busy_retrieval)

    with django_capture_on_commit_callbacks(execute=True) as callbacks:  # type: ignore[operator]
        process_dirty_rollups.apply()

    # One prompt check: the second pass found nothing dirty. (The opened violation also
    # has the alert rules look at it, through callbacks of their own.)
    prompt = [c for c in callbacks if getattr(c, "func", None) == check_budgets_promptly.delay]
    assert len(prompt) == 1
    violation = Violation.objects.get()
    assert (violation.pipeline, violation.stage) == (busy, busy_retrieval)
    assert violation.sample_count == 30
    assert violation.observed_ms == pytest.approx(600, rel=0.01)
    # No tick ran: the checked pipeline's tick mark is still the initial one.
    assert BudgetEvaluation.objects.get(pipeline=busy).evaluated_at == NEVER
    assert not BudgetEvaluation.objects.filter(pipeline=quiet).exists()


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_opens_the_violation_from_a_rollup_pass_before_any_tick(
    world: TeamWorld, tmp_path: Path
) -> None:
    pipeline, retrieval = rag_pipeline(world, "rag-chat")
    slow_retrievals_just_finalized(pipeline, retrieval)
    log = tmp_path / "worker.log"

    with celery_worker(log):
        # The beat's two-second expiry would not survive the worker's start.
        process_dirty_rollups.apply_async(expires=120)
        opened = wait_for(lambda: Violation.objects.exists(), timeout=60)

    assert opened, f"no violation opened; the worker's log:\n{log.read_text()[-4000:]}"
    assert "apps.rollups.tasks.check_budgets_promptly" in log.read_text()
    assert Violation.objects.get().stage == retrieval
    assert BudgetEvaluation.objects.get(pipeline=pipeline).evaluated_at == NEVER
