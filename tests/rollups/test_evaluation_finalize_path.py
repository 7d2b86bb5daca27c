"""A finalize pass that wrote samples gets them rolled up, and so the budgets checked: at
once with ROLLUP_SETTLE_SECONDS=0, by the first pass after the settle time otherwise."""

import time
from datetime import UTC, datetime, timedelta

import pytest
from django.db.models import Sum
from django.test import override_settings
from django.utils import timezone

from apps.analysis.models import DirtyBucket
from apps.analysis.services.dirty_buckets import dirty_buckets_mark
from apps.analysis.tasks import finalize_quiet_traces
from apps.ingest.models import Encoding, Trace
from apps.ingest.services.batches import raw_batch_store, raw_batches_drain
from apps.pipelines.models import Pipeline, Stage
from apps.rollups.models import BudgetEvaluation, Measure, RollupBucket, Violation
from apps.rollups.tasks import process_dirty_rollups
from apps.teams.models import Team
from tests.builders.configuration import make_pipeline, make_rule, make_stage
from tests.builders.spans import encode, retrieval_request
from tests.conftest import TeamWorld
from tests.timing import S

pytestmark = pytest.mark.usefixtures("clean_cache")

NEVER = datetime(1970, 1, 1, tzinfo=UTC)


def rag_pipeline(team: Team) -> tuple[Pipeline, Stage]:
    pipeline = make_pipeline(team, "rag-chat", match_root_span="POST /chat")
    retrieval = make_stage(pipeline, "retrieval", budget_ms=350)
    make_rule(retrieval, span_name="retrieve*")
    return pipeline, retrieval


def ingest_requests(
    team: Team, *, first_id: int, count: int, retrieval_ms: int, root: str = "POST /chat"
) -> list[bytes]:
    """``count`` requests of the last half minute stored through ingestion; their trace ids."""
    now_ns = int(timezone.now().timestamp()) * S
    spans = []
    for offset in range(count):
        trace_id = first_id + offset
        t0 = now_ns - (30 - offset) * S
        spans += retrieval_request(trace_id, t0, retrieval_ms=retrieval_ms, root=root)
    raw_batch_store(
        team=team, token=None, encoding=Encoding.OTLP_PROTOBUF, body=encode(spans),
        span_count=len(spans),
    )  # fmt: skip
    raw_batches_drain()
    return [(first_id + offset).to_bytes(16, "big") for offset in range(count)]


def go_quiet(trace_ids: list[bytes]) -> None:
    """No span for a minute: the traces are due for finalization."""
    quiet_since = timezone.now() - timedelta(minutes=1)
    Trace.objects.filter(trace_id__in=trace_ids).update(last_span_at=quiet_since)


def finalize_run(capture: object) -> None:
    """One beat's finalize task, with everything it enqueues after its commits."""
    with capture(execute=True):  # type: ignore[operator]
        finalize_quiet_traces.apply()


def rolled_up(pipeline: Pipeline, stage: Stage) -> int:
    rows = RollupBucket.objects.filter(
        pipeline_id=pipeline.pk, stage_id=stage.pk, measure=Measure.WALL, resolution=10
    )
    return rows.aggregate(total=Sum("count"))["total"] or 0


def start_of_a_second() -> int:
    time.sleep(1 - time.time() % 1)
    return int(time.time())


@override_settings(ROLLUP_SETTLE_SECONDS=0)
def test_a_finalize_pass_rolls_up_its_samples_and_opens_the_violation_before_any_beat(
    world: TeamWorld, eager: None, django_capture_on_commit_callbacks: object
) -> None:
    pipeline, retrieval = rag_pipeline(world.team)
    go_quiet(ingest_requests(world.team, first_id=1, count=30, retrieval_ms=600))

    finalize_run(django_capture_on_commit_callbacks)

    assert not DirtyBucket.objects.exists()
    assert rolled_up(pipeline, retrieval) == 30
    violation = Violation.objects.get()
    assert (violation.pipeline, violation.stage) == (pipeline, retrieval)
    assert violation.sample_count == 30
    assert violation.observed_ms == pytest.approx(600, rel=0.01)
    # No tick ran: the prompt check the rollup pass enqueued opened it.
    assert BudgetEvaluation.objects.get(pipeline=pipeline).evaluated_at == NEVER


def test_a_finalize_pass_without_samples_leaves_the_rollups_to_the_beat(
    world: TeamWorld, eager: None, django_capture_on_commit_callbacks: object
) -> None:
    pipeline, _ = rag_pipeline(world.team)
    # Marked by some earlier pass: only a rollup pass would clear it.
    dirty_buckets_mark([(pipeline.pk, int(timezone.now().timestamp()) * S)])
    # Requests no pipeline matches: finalized, but no stage sample written.
    go_quiet(ingest_requests(world.team, first_id=1, count=5, retrieval_ms=100, root="GET /up"))

    finalize_run(django_capture_on_commit_callbacks)

    assert Trace.objects.filter(finalized_at__isnull=False).count() == 5
    assert DirtyBucket.objects.filter(pipeline_id=pipeline.pk).exists()


@override_settings(ROLLUP_SETTLE_SECONDS=0)
def test_finalize_passes_get_one_rollup_pass_a_second(
    world: TeamWorld, eager: None, django_capture_on_commit_callbacks: object
) -> None:
    pipeline, retrieval = rag_pipeline(world.team)
    first = ingest_requests(world.team, first_id=1, count=5, retrieval_ms=100)
    second = ingest_requests(world.team, first_id=101, count=5, retrieval_ms=100)
    third = ingest_requests(world.team, first_id=201, count=5, retrieval_ms=100)

    began = start_of_a_second()
    go_quiet(first)
    finalize_run(django_capture_on_commit_callbacks)
    assert rolled_up(pipeline, retrieval) == 5
    go_quiet(second)
    finalize_run(django_capture_on_commit_callbacks)
    assert int(time.time()) == began, "too slow to finalize twice within one second"

    # The second run's samples wait: a pass was enqueued in this second already.
    assert rolled_up(pipeline, retrieval) == 5
    assert DirtyBucket.objects.filter(pipeline_id=pipeline.pk).exists()

    start_of_a_second()
    go_quiet(third)
    finalize_run(django_capture_on_commit_callbacks)

    assert rolled_up(pipeline, retrieval) == 15
    assert not DirtyBucket.objects.exists()


def test_with_a_settle_time_the_buckets_wait_for_the_first_pass_after_it(
    world: TeamWorld, eager: None, django_capture_on_commit_callbacks: object
) -> None:
    pipeline, retrieval = rag_pipeline(world.team)
    go_quiet(ingest_requests(world.team, first_id=1, count=30, retrieval_ms=600))

    with override_settings(ROLLUP_SETTLE_SECONDS=30):
        finalize_run(django_capture_on_commit_callbacks)
        # The pass the finalize run enqueued found its buckets too fresh.
        assert rolled_up(pipeline, retrieval) == 0
        assert not Violation.objects.exists()
        DirtyBucket.objects.update(dirty_since=timezone.now() - timedelta(seconds=30))
        with django_capture_on_commit_callbacks(execute=True):  # type: ignore[operator]
            process_dirty_rollups.apply()

    assert rolled_up(pipeline, retrieval) == 30
    assert Violation.objects.get().stage == retrieval
    assert BudgetEvaluation.objects.get(pipeline=pipeline).evaluated_at == NEVER
