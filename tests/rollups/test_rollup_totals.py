"""Rollup buckets at every resolution equal a direct computation from traces and samples."""

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from django.utils import timezone

from apps.analysis.models import DirtyBucket
from apps.core.time import RESOLUTIONS
from apps.ingest.models import Trace
from apps.rollups.models import E2E_STAGE_ID, UNTRACKED_STAGE_ID, Measure, RollupBucket
from apps.rollups.services.bucket_pass import rollups_process_dirty
from apps.rollups.sketches.ddsketch import Sketch
from tests.builders.configuration import make_pipeline
from tests.builders.samples_and_rollups import (
    NEW_YEAR_S,
    add_random_traces,
    add_trace,
    assert_rollups_exact,
    make_rollup_pipeline,
    snapshot,
    stored_rollups,
)
from tests.conftest import TeamWorld
from tests.timing import MS, S

# Shortly after the data below: every resolution is built by merging.
SOON_AFTER = datetime.fromtimestamp(NEW_YEAR_S + 600, tz=UTC)


def test_every_resolution_equals_a_direct_computation(world: TeamWorld) -> None:
    pipeline, stages = make_rollup_pipeline(world.team, "rag", stages=4, objective_ms=900)
    rng = np.random.default_rng(7)
    # Three minutes across midnight: every resolution's boundary cuts it.
    add_random_traces(pipeline, stages, rng=rng, n=600, from_ns=(NEW_YEAR_S - 90) * S, span_s=180)
    result = rollups_process_dirty(now=SOON_AFTER)

    assert result.claimed == {10: 18, 60: 4, 600: 2, 3600: 2, 86400: 2}
    assert not DirtyBucket.objects.exists()
    assert assert_rollups_exact(pipeline) > 4 * (18 + 4 + 2 + 2 + 2)
    day = stored_rollups(pipeline, 86400)
    assert sum(row.count for (_, stage, _), row in day.items() if stage == E2E_STAGE_ID) == 600


def test_a_small_limit_takes_several_calls_to_the_same_totals(world: TeamWorld) -> None:
    pipeline, stages = make_rollup_pipeline(world.team, "rag", stages=2)
    add_random_traces(
        pipeline, stages, rng=np.random.default_rng(3), n=200, from_ns=(NEW_YEAR_S - 60) * S,
        span_s=120,
    )  # fmt: skip
    calls = 0
    while rollups_process_dirty(limit=3, now=SOON_AFTER).buckets:
        calls += 1
    assert calls >= 4  # 12 buckets of 10 s, 3 a call
    assert assert_rollups_exact(pipeline)


def test_minutes_merged_from_ten_second_buckets_equal_minutes_from_samples(
    world: TeamWorld,
) -> None:
    pipeline, stages = make_rollup_pipeline(world.team, "rag", stages=3)
    add_random_traces(
        pipeline, stages, rng=np.random.default_rng(11), n=300, from_ns=NEW_YEAR_S * S,
        span_s=150,
    )  # fmt: skip
    rollups_process_dirty(now=SOON_AFTER)
    merged = snapshot([pipeline.pk])

    RollupBucket.objects.all().delete()
    for minute in range(3):
        DirtyBucket.objects.create(
            pipeline_id=pipeline.pk,
            resolution=60,
            bucket_start=datetime.fromtimestamp(NEW_YEAR_S + 60 * minute, tz=UTC),
        )
    # Three hours later the 10 s buckets are gone: minutes come from samples.
    result = rollups_process_dirty(now=SOON_AFTER + timedelta(hours=3))
    assert result.claimed[60] == 3
    assert not RollupBucket.objects.filter(resolution=10).exists()
    from_samples = {row for row in snapshot([pipeline.pk]) if row[3] == 60}
    assert from_samples == {row for row in merged if row[3] == 60}


def test_good_count_holds_end_to_end_values_within_the_objective_threshold(
    world: TeamWorld,
) -> None:
    pipeline, [stage] = make_rollup_pipeline(world.team, "rag", stages=1, objective_ms=500)
    start = NEW_YEAR_S * S
    for e2e_ms in (100, 499, 500, 501, 2000):
        add_trace(pipeline, start, e2e_ms * MS, {stage: (50 * MS, 40 * MS, False)})
    rollups_process_dirty(now=SOON_AFTER)

    for resolution in RESOLUTIONS:
        rows = stored_rollups(pipeline, resolution)
        e2e = next(r for (_, s, _), r in rows.items() if s == E2E_STAGE_ID)
        assert (e2e.count, e2e.good_count) == (5, 3)
        assert all(r.good_count == 0 for (_, s, _), r in rows.items() if s != E2E_STAGE_ID)
    assert assert_rollups_exact(pipeline)


def test_a_pipeline_without_objective_counts_nothing_as_good(world: TeamWorld) -> None:
    pipeline, [stage] = make_rollup_pipeline(world.team, "rag", stages=1)
    add_trace(pipeline, NEW_YEAR_S * S, 10 * MS, {stage: (5 * MS, 5 * MS, False)})
    rollups_process_dirty(now=SOON_AFTER)
    assert not RollupBucket.objects.filter(good_count__gt=0).exists()
    assert RollupBucket.objects.filter(resolution=10).count() == 4


def test_one_bucket_holds_end_to_end_untracked_and_both_measures_per_stage(
    world: TeamWorld,
) -> None:
    pipeline, [fast, slow] = make_rollup_pipeline(world.team, "rag", stages=2)
    start = NEW_YEAR_S * S + 3 * S
    add_trace(
        pipeline, start, 1000 * MS,
        {fast: (100 * MS, 80 * MS, False), slow: (700 * MS, 690 * MS, True)},
        error=True, untracked_ns=230 * MS,
    )  # fmt: skip
    add_trace(pipeline, start + S, 400 * MS, {slow: (300 * MS, 300 * MS, False)}, untracked_ns=0)
    rollups_process_dirty(now=SOON_AFTER)

    rows = {(s, m): r for (_, s, m), r in stored_rollups(pipeline, 10).items()}
    assert set(rows) == {
        (E2E_STAGE_ID, Measure.WALL), (UNTRACKED_STAGE_ID, Measure.CRITICAL),
        (fast, Measure.WALL), (fast, Measure.CRITICAL), (slow, Measure.WALL),
        (slow, Measure.CRITICAL),
    }  # fmt: skip
    e2e = rows[(E2E_STAGE_ID, Measure.WALL)]
    assert (e2e.count, e2e.error_count, e2e.sum_ns, e2e.max_ns) == (2, 1, 1400 * MS, 1000 * MS)
    untracked = rows[(UNTRACKED_STAGE_ID, Measure.CRITICAL)]
    assert (untracked.count, untracked.sum_ns) == (2, 230 * MS)
    slow_critical = rows[(slow, Measure.CRITICAL)]
    assert (slow_critical.count, slow_critical.error_count, slow_critical.sum_ns) == (
        2, 1, 990 * MS,
    )  # fmt: skip
    assert Sketch.from_bytes(bytes(rows[(fast, Measure.WALL)].sketch)).quantile(0.5) == (
        pytest.approx(100, rel=0.01)
    )


def test_incomplete_traces_and_other_pipelines_stay_out(world: TeamWorld) -> None:
    pipeline, [stage] = make_rollup_pipeline(world.team, "rag", stages=1)
    other, [other_stage] = make_rollup_pipeline(world.team, "agent", stages=1)
    start = NEW_YEAR_S * S
    add_trace(pipeline, start, 100 * MS, {stage: (10 * MS, 10 * MS, False)})
    add_trace(pipeline, start, 900 * MS, {}, incomplete=True)
    add_trace(other, start, 5000 * MS, {other_stage: (10 * MS, 10 * MS, False)})
    rollups_process_dirty(now=SOON_AFTER)

    e2e = stored_rollups(pipeline, 10)
    assert [r.count for (_, s, _), r in e2e.items() if s == E2E_STAGE_ID] == [1]
    assert assert_rollups_exact(pipeline)
    assert assert_rollups_exact(other)


def test_a_bucket_of_a_deleted_pipeline_is_emptied_at_every_resolution(
    world: TeamWorld,
) -> None:
    pipeline, [stage] = make_rollup_pipeline(world.team, "rag", stages=1)
    add_trace(pipeline, NEW_YEAR_S * S, 100 * MS, {stage: (10 * MS, 10 * MS, False)})
    rollups_process_dirty(now=SOON_AFTER)
    pipeline_id = pipeline.pk
    pipeline.delete()
    DirtyBucket.objects.create(
        pipeline_id=pipeline_id, resolution=10,
        bucket_start=datetime.fromtimestamp(NEW_YEAR_S, tz=UTC),
    )  # fmt: skip
    rollups_process_dirty(now=SOON_AFTER)
    assert not RollupBucket.objects.filter(pipeline_id=pipeline_id).exists()
    assert not DirtyBucket.objects.exists()


def test_a_trace_finalized_from_ingested_spans_reaches_every_resolution(
    world: TeamWorld,
) -> None:
    from apps.analysis.services.finalize import traces_finalize_due
    from apps.ingest.models import Encoding
    from apps.ingest.services.batches import raw_batch_store, raw_batches_drain
    from tests.builders.configuration import make_rule, make_stage
    from tests.builders.spans import encode, span

    pipeline = make_pipeline(world.team, "chat", match_root_span="POST /chat")
    make_rule(make_stage(pipeline, "retrieval"), span_name="vector.search*")
    t0 = int((timezone.now() - timedelta(minutes=5)).timestamp()) * S
    spans = [
        span(0x10, None, t0, t0 + 900 * MS, name="POST /chat"),
        span(0x20, 0x10, t0 + 10 * MS, t0 + 210 * MS, name="vector.search"),
    ]
    raw_batch_store(
        team=world.team, token=None, encoding=Encoding.OTLP_PROTOBUF, body=encode(spans),
        span_count=len(spans),
    )  # fmt: skip
    raw_batches_drain()
    assert traces_finalize_due(now=timezone.now() + timedelta(minutes=1)).traces == 1

    rollups_process_dirty()
    trace = Trace.objects.get()
    assert trace.pipeline_id == pipeline.pk
    for resolution in RESOLUTIONS:
        rows = stored_rollups(pipeline, resolution)
        e2e = next(r for (_, s, _), r in rows.items() if s == E2E_STAGE_ID)
        assert (e2e.count, e2e.max_ns) == (1, 900 * MS)
    assert assert_rollups_exact(pipeline)
