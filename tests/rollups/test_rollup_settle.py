"""A finest bucket waits ROLLUP_SETTLE_SECONDS after its first mark before the worker
rewrites it: marks in between leave that moment as it is, and the rewrite then holds
every sample marked so far."""

from datetime import timedelta

import numpy as np
from django.test import override_settings
from django.utils import timezone

from apps.analysis.models import DirtyBucket
from apps.core.time import FINEST_RESOLUTION
from apps.pipelines.models import Pipeline
from apps.rollups.models import Measure, RollupBucket
from apps.rollups.services.bucket_pass import rollups_process_dirty
from apps.rollups.tasks import process_dirty_rollups
from tests.builders.samples_and_rollups import (
    add_random_traces,
    add_trace,
    assert_rollups_exact,
    make_rollup_pipeline,
)
from tests.conftest import TeamWorld
from tests.timing import MS, S


def _recent_second_ns() -> int:
    """The start of a 10 s bucket two minutes ago: inside every resolution's retention."""
    second = int((timezone.now() - timedelta(minutes=2)).timestamp())
    return (second - second % FINEST_RESOLUTION) * S


def _one_trace_marked(world: TeamWorld) -> tuple[Pipeline, int, int, DirtyBucket]:
    """A one-stage pipeline with one trace of two minutes ago: the pipeline, its stage,
    the trace's start and the dirty row of its 10 s bucket."""
    pipeline, [stage] = make_rollup_pipeline(world.team, "rag", stages=1)
    start = _recent_second_ns()
    add_trace(pipeline, start, 100 * MS, {stage: (50 * MS, 50 * MS, False)})
    [row] = DirtyBucket.objects.filter(resolution=FINEST_RESOLUTION)
    return pipeline, stage, start, row


def test_marks_after_the_first_leave_the_dirty_since_moment_as_it_was(
    world: TeamWorld,
) -> None:
    pipeline, stage, start, first = _one_trace_marked(world)

    add_trace(pipeline, start + S, 200 * MS, {stage: (60 * MS, 60 * MS, False)})

    [again] = DirtyBucket.objects.filter(resolution=FINEST_RESOLUTION)
    assert again.pk == first.pk
    assert again.dirty_since == first.dirty_since
    assert again.marked_at > first.marked_at


def test_a_bucket_dirty_for_less_than_the_settle_time_waits_then_is_rewritten_whole(
    world: TeamWorld,
) -> None:
    pipeline, stage, start, row = _one_trace_marked(world)

    early = rollups_process_dirty(now=row.dirty_since + timedelta(seconds=2.9), settle_s=3)

    assert FINEST_RESOLUTION not in early.claimed
    assert not RollupBucket.objects.filter(pipeline_id=pipeline.pk).exists()
    assert DirtyBucket.objects.filter(pk=row.pk).exists()

    # Analyzed meanwhile: the wait is not started over, and the rewrite holds it too.
    add_trace(pipeline, start + 2 * S, 300 * MS, {stage: (70 * MS, 70 * MS, False)})
    done = rollups_process_dirty(now=row.dirty_since + timedelta(seconds=3), settle_s=3)

    assert done.claimed[FINEST_RESOLUTION] == 1
    assert not DirtyBucket.objects.filter(resolution=FINEST_RESOLUTION).exists()
    assert assert_rollups_exact(pipeline)
    ten_second = RollupBucket.objects.get(
        pipeline_id=pipeline.pk, resolution=FINEST_RESOLUTION, stage_id=stage, measure=Measure.WALL
    )
    assert ten_second.count == 2


def test_a_bucket_marked_after_its_rewrite_waits_its_own_settle_time(world: TeamWorld) -> None:
    pipeline, stage, start, row = _one_trace_marked(world)
    rollups_process_dirty(now=row.dirty_since + timedelta(seconds=3), settle_s=3)

    add_trace(pipeline, start + S, 200 * MS, {stage: (60 * MS, 60 * MS, False)})
    [fresh] = DirtyBucket.objects.filter(resolution=FINEST_RESOLUTION)

    assert fresh.dirty_since > row.dirty_since
    assert FINEST_RESOLUTION not in rollups_process_dirty(settle_s=3).claimed
    rollups_process_dirty(now=fresh.dirty_since + timedelta(seconds=3), settle_s=3)
    assert assert_rollups_exact(pipeline)


def _recent_traces(world: TeamWorld, seed: int) -> Pipeline:
    """Twenty traces of half a minute, two minutes ago, their buckets just marked dirty."""
    pipeline, stages = make_rollup_pipeline(world.team, "rag", stages=2)
    add_random_traces(
        pipeline, stages, rng=np.random.default_rng(seed), n=20, from_ns=_recent_second_ns(),
        span_s=30,
    )  # fmt: skip
    return pipeline


def test_the_worker_task_holds_fresh_buckets_for_the_configured_time(world: TeamWorld) -> None:
    pipeline = _recent_traces(world, seed=3)
    fresh = DirtyBucket.objects.filter(resolution=FINEST_RESOLUTION).count()
    assert fresh > 1

    with override_settings(ROLLUP_SETTLE_SECONDS=60.0):
        process_dirty_rollups()
    assert DirtyBucket.objects.filter(resolution=FINEST_RESOLUTION).count() == fresh
    assert not RollupBucket.objects.filter(pipeline_id=pipeline.pk).exists()

    # Dirty for longer than the settle time: rewritten, and their parents with them.
    DirtyBucket.objects.update(dirty_since=timezone.now() - timedelta(seconds=61))
    with override_settings(ROLLUP_SETTLE_SECONDS=60.0):
        process_dirty_rollups()
    assert not DirtyBucket.objects.exists()
    assert assert_rollups_exact(pipeline)


def test_a_settle_time_of_zero_rewrites_at_the_first_pass(world: TeamWorld) -> None:
    pipeline = _recent_traces(world, seed=4)

    with override_settings(ROLLUP_SETTLE_SECONDS=0.0):
        process_dirty_rollups()

    assert not DirtyBucket.objects.exists()
    assert assert_rollups_exact(pipeline)
