"""Late data: a trace finalized again replaces its contribution, never adds to it."""

from datetime import UTC, datetime, timedelta

import numpy as np
from django.utils import timezone

from apps.analysis.models import DirtyBucket
from apps.analysis.services.finalize import traces_finalize_due
from apps.core.time import RESOLUTIONS
from apps.ingest.models import Encoding, Trace
from apps.ingest.services.batches import raw_batch_store, raw_batches_drain
from apps.rollups.models import E2E_STAGE_ID, RollupBucket
from apps.rollups.services.bucket_pass import rollups_process_dirty
from apps.teams.models import Team
from tests.builders.configuration import make_pipeline, make_rule, make_stage
from tests.builders.samples_and_rollups import (
    NEW_YEAR_S,
    add_random_traces,
    add_trace,
    assert_rollups_exact,
    make_rollup_pipeline,
    refinalize,
    stored_rollups,
)
from tests.builders.spans import HandSpan, encode, span
from tests.conftest import TeamWorld
from tests.timing import MS, S

SOON_AFTER = datetime.fromtimestamp(NEW_YEAR_S + 600, tz=UTC)


def e2e_counts(pipeline_id: int) -> dict[int, int]:
    rows = RollupBucket.objects.filter(pipeline_id=pipeline_id, stage_id=E2E_STAGE_ID)
    totals = dict.fromkeys(RESOLUTIONS, 0)
    for row in rows:
        totals[row.resolution] += row.count
    return totals


def test_a_trace_finalized_again_with_other_values_replaces_its_contribution(
    world: TeamWorld,
) -> None:
    pipeline, stages = make_rollup_pipeline(world.team, "rag", stages=2)
    traces = add_random_traces(
        pipeline, stages, rng=np.random.default_rng(5), n=50, from_ns=NEW_YEAR_S * S, span_s=30
    )
    rollups_process_dirty(now=SOON_AFTER)
    late = traces[0]
    assert late.start_ns is not None
    refinalize(
        late, pipeline=pipeline, start_ns=late.start_ns, e2e_ns=90_000 * MS,
        stages={stages[0]: (80_000 * MS, 80_000 * MS, True)}, error=True,
    )  # fmt: skip
    rollups_process_dirty(now=SOON_AFTER)

    assert e2e_counts(pipeline.pk) == dict.fromkeys(RESOLUTIONS, 50)
    day = next(
        iter(r for (_, s, _), r in stored_rollups(pipeline, 86400).items() if s == E2E_STAGE_ID)
    )
    assert day.max_ns == 90_000 * MS
    assert assert_rollups_exact(pipeline)


def test_a_trace_finalized_again_later_in_time_moves_to_its_new_bucket(
    world: TeamWorld,
) -> None:
    pipeline, [stage] = make_rollup_pipeline(world.team, "rag", stages=1)
    start = NEW_YEAR_S * S
    trace = add_trace(pipeline, start, 100 * MS, {stage: (50 * MS, 50 * MS, False)})
    add_trace(pipeline, start + S, 200 * MS, {stage: (60 * MS, 60 * MS, False)})
    rollups_process_dirty(now=SOON_AFTER)
    # A late root span moved the trace's start two minutes on.
    refinalize(
        trace, pipeline=pipeline, start_ns=start + 125 * S, e2e_ns=300 * MS,
        stages={stage: (70 * MS, 70 * MS, False)},
    )  # fmt: skip
    rollups_process_dirty(now=SOON_AFTER)

    assert e2e_counts(pipeline.pk) == dict.fromkeys(RESOLUTIONS, 2)
    assert len([k for k in stored_rollups(pipeline, 60) if k[1] == E2E_STAGE_ID]) == 2
    assert assert_rollups_exact(pipeline)


def test_a_trace_moved_to_another_pipeline_leaves_the_old_pipelines_buckets_correct(
    world: TeamWorld,
) -> None:
    old, [old_stage] = make_rollup_pipeline(world.team, "rag", stages=1)
    new, [new_stage] = make_rollup_pipeline(world.team, "agent", stages=1)
    start = NEW_YEAR_S * S
    moving = add_trace(old, start, 100 * MS, {old_stage: (50 * MS, 50 * MS, False)})
    add_trace(old, start + 20 * S, 200 * MS, {old_stage: (60 * MS, 60 * MS, False)})
    rollups_process_dirty(now=SOON_AFTER)
    refinalize(
        moving, pipeline=new, start_ns=start, e2e_ns=100 * MS,
        stages={new_stage: (40 * MS, 40 * MS, False)},
    )  # fmt: skip
    rollups_process_dirty(now=SOON_AFTER)

    assert e2e_counts(old.pk) == dict.fromkeys(RESOLUTIONS, 1)
    assert e2e_counts(new.pk) == dict.fromkeys(RESOLUTIONS, 1)
    # The 10 s bucket the trace left has nothing in it any more: no rows at all.
    assert not RollupBucket.objects.filter(
        pipeline_id=old.pk, resolution=10, bucket_start=datetime.fromtimestamp(NEW_YEAR_S, tz=UTC)
    ).exists()
    assert assert_rollups_exact(old)
    assert assert_rollups_exact(new)


def test_processing_twice_without_changes_gives_the_same_rows(world: TeamWorld) -> None:
    pipeline, stages = make_rollup_pipeline(world.team, "rag", stages=2)
    add_random_traces(
        pipeline, stages, rng=np.random.default_rng(9), n=40, from_ns=NEW_YEAR_S * S, span_s=20
    )
    rollups_process_dirty(now=SOON_AFTER)
    first = e2e_counts(pipeline.pk)
    DirtyBucket.objects.create(
        pipeline_id=pipeline.pk,
        resolution=10,
        bucket_start=datetime.fromtimestamp(NEW_YEAR_S, tz=UTC),
    )
    rollups_process_dirty(now=SOON_AFTER)
    assert e2e_counts(pipeline.pk) == first == dict.fromkeys(RESOLUTIONS, 40)
    assert assert_rollups_exact(pipeline)


def _store(team: Team, spans: list[HandSpan]) -> None:
    raw_batch_store(
        team=team, token=None, encoding=Encoding.OTLP_PROTOBUF, body=encode(spans),
        span_count=len(spans),
    )  # fmt: skip
    raw_batches_drain()


def test_a_late_span_from_ingestion_is_counted_once_with_its_new_values(
    world: TeamWorld,
) -> None:
    pipeline = make_pipeline(world.team, "chat", match_root_span="POST /chat")
    make_rule(make_stage(pipeline, "llm"), span_name="chat*")
    t0 = int((timezone.now() - timedelta(minutes=5)).timestamp()) * S
    root = span(0x10, None, t0, t0 + 900 * MS, name="POST /chat", kind="server")
    _store(world.team, [root, span(0x20, 0x10, t0, t0 + 300 * MS, name="chat a")])
    traces_finalize_due(now=timezone.now() + timedelta(minutes=1))
    rollups_process_dirty()
    assert e2e_counts(pipeline.pk) == dict.fromkeys(RESOLUTIONS, 1)

    _store(world.team, [span(0x30, 0x10, t0 + 300 * MS, t0 + 800 * MS, name="chat b")])
    assert traces_finalize_due(now=timezone.now() + timedelta(minutes=1)).traces == 1
    rollups_process_dirty()

    assert Trace.objects.get().revision == 2
    assert e2e_counts(pipeline.pk) == dict.fromkeys(RESOLUTIONS, 1)
    stage_rows = RollupBucket.objects.filter(pipeline_id=pipeline.pk, resolution=10, stage_id__gt=0)
    assert {(row.count, row.sum_ns) for row in stage_rows} == {(1, 800 * MS)}
    assert assert_rollups_exact(pipeline)
