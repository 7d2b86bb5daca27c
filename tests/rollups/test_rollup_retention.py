"""Retention of rollup buckets, and what an old dirty bucket is rebuilt from."""

from datetime import UTC, datetime, timedelta

import numpy as np
from django.conf import settings
from django.utils import timezone

from apps.analysis.models import DirtyBucket
from apps.rollups.models import E2E_STAGE_ID, Measure, RollupBucket
from apps.rollups.services.bucket_pass import rollups_process_dirty
from apps.rollups.services.retention import rollups_expire
from apps.rollups.sketches.ddsketch import Sketch
from apps.rollups.tasks import expire_rollups, process_dirty_rollups
from tests.builders.samples_and_rollups import (
    NEW_YEAR_S,
    add_random_traces,
    add_trace,
    assert_rollups_exact,
    make_rollup_pipeline,
    snapshot,
)
from tests.conftest import TeamWorld
from tests.timing import MS, S

NEW_YEAR = datetime.fromtimestamp(NEW_YEAR_S, tz=UTC)


def bucket(pipeline_id: int, resolution: int, start: datetime) -> RollupBucket:
    return RollupBucket.objects.create(
        team_id=1, pipeline_id=pipeline_id, stage_id=E2E_STAGE_ID, measure=Measure.WALL,
        resolution=resolution, bucket_start=start, count=1, sum_ns=MS, max_ns=MS,
        sketch=Sketch.from_values([1.0]).to_bytes(),
    )  # fmt: skip


def test_expiry_deletes_each_resolution_past_its_retention_and_keeps_days(db: None) -> None:
    now = NEW_YEAR
    hour_keep = timedelta(days=settings.SAMPLE_RETENTION_DAYS + 1)
    ages = {
        10: (timedelta(hours=1, minutes=59), timedelta(hours=2, seconds=10)),
        60: (timedelta(days=2, hours=23), timedelta(days=3, minutes=1)),
        600: (timedelta(days=2, hours=23), timedelta(days=3, minutes=10)),
        3600: (hour_keep - timedelta(hours=1), hour_keep + timedelta(hours=1)),
        86400: (timedelta(days=400), timedelta(days=4000)),
    }
    kept = set()
    for resolution, (young, old) in ages.items():
        kept.add(bucket(7, resolution, now - young).pk)
        old_pk = bucket(7, resolution, now - old).pk
        if resolution == 86400:
            kept.add(old_pk)

    deleted = rollups_expire(now=now)

    assert deleted == {10: 1, 60: 1, 600: 1, 3600: 1}
    assert set(RollupBucket.objects.values_list("pk", flat=True)) == kept
    assert RollupBucket.objects.filter(resolution=86400).count() == 2


def test_a_dirty_minute_whose_ten_second_buckets_expired_is_rebuilt_from_samples(
    world: TeamWorld,
) -> None:
    pipeline, stages = make_rollup_pipeline(world.team, "rag", stages=3, objective_ms=700)
    add_random_traces(
        pipeline, stages, rng=np.random.default_rng(6), n=120, from_ns=NEW_YEAR_S * S, span_s=100
    )
    result = rollups_process_dirty(now=NEW_YEAR + timedelta(hours=3))

    assert result.claimed[10] == 10
    assert not RollupBucket.objects.filter(resolution=10).exists()
    assert assert_rollups_exact(pipeline, resolutions=(60, 3600, 86400))


def test_an_hour_whose_minutes_expired_is_rebuilt_from_samples(world: TeamWorld) -> None:
    pipeline, stages = make_rollup_pipeline(world.team, "rag", stages=2)
    add_random_traces(
        pipeline, stages, rng=np.random.default_rng(12), n=60, from_ns=NEW_YEAR_S * S, span_s=200
    )
    rollups_process_dirty(now=NEW_YEAR + timedelta(minutes=10))
    rollups_expire(now=NEW_YEAR + timedelta(days=4))
    assert not RollupBucket.objects.filter(resolution__in=(10, 60)).exists()
    hour = NEW_YEAR
    DirtyBucket.objects.create(pipeline_id=pipeline.pk, resolution=3600, bucket_start=hour)
    RollupBucket.objects.filter(resolution=3600).delete()

    rollups_process_dirty(now=NEW_YEAR + timedelta(days=4))

    assert assert_rollups_exact(pipeline, resolutions=(3600, 86400))


def test_a_dirty_bucket_older_than_the_samples_is_left_as_it_is(world: TeamWorld) -> None:
    pipeline, [stage] = make_rollup_pipeline(world.team, "rag", stages=1)
    add_trace(pipeline, NEW_YEAR_S * S, 300 * MS, {stage: (100 * MS, 90 * MS, False)})
    rollups_process_dirty(now=NEW_YEAR + timedelta(minutes=10))
    before = snapshot([pipeline.pk])
    later = NEW_YEAR + timedelta(days=settings.SAMPLE_RETENTION_DAYS + 2)
    for resolution in (60, 3600, 86400):
        DirtyBucket.objects.create(
            pipeline_id=pipeline.pk, resolution=resolution, bucket_start=NEW_YEAR
        )

    result = rollups_process_dirty(now=later)

    assert result.claimed == {60: 1, 3600: 1, 86400: 1}
    assert snapshot([pipeline.pk]) == before
    assert not DirtyBucket.objects.exists()


def test_the_rollup_task_rolls_up_recent_traces_and_the_expiry_task_keeps_them(
    world: TeamWorld,
) -> None:
    pipeline, stages = make_rollup_pipeline(world.team, "rag", stages=2)
    recent = int((timezone.now() - timedelta(minutes=3)).timestamp()) * S
    add_random_traces(
        pipeline, stages, rng=np.random.default_rng(1), n=30, from_ns=recent, span_s=60
    )

    # As the worker finds them once they have been dirty for the settle time.
    DirtyBucket.objects.update(
        dirty_since=timezone.now() - timedelta(seconds=settings.ROLLUP_SETTLE_SECONDS)
    )
    process_dirty_rollups()
    expire_rollups()

    assert not DirtyBucket.objects.exists()
    assert assert_rollups_exact(pipeline)


def test_the_scheduler_runs_both_tasks() -> None:
    tasks = {entry["task"]: entry["schedule"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert tasks["apps.rollups.tasks.process_dirty_rollups"] == 2.0
    assert "apps.rollups.tasks.expire_rollups" in tasks
