"""A rollup that dies half way leaves the last consistent state and redoes the buckets."""

from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest
from django.db import OperationalError

from apps.analysis.models import DirtyBucket
from apps.rollups.models import RollupBucket
from apps.rollups.services import bucket_compute as rollup_compute
from apps.rollups.services.bucket_pass import rollups_process_dirty
from tests.builders.samples_and_rollups import (
    NEW_YEAR_S,
    add_random_traces,
    assert_rollups_exact,
    make_rollup_pipeline,
    refinalize,
    snapshot,
)
from tests.conftest import TeamWorld
from tests.timing import MS, S

SOON_AFTER = datetime.fromtimestamp(NEW_YEAR_S + 600, tz=UTC)


class Crash(OperationalError):
    """The pass itself dies (a lost connection, a killed worker), not one of its items:
    an item's own failure is quarantined instead (see test_rollup_isolation.py)."""


def crash_on_call(monkeypatch: pytest.MonkeyPatch, name: str, call: int) -> list[Any]:
    """Make ``rollup_compute.<name>`` raise on its ``call``-th call (after the
    earlier calls' rows were written)."""
    original = getattr(rollup_compute, name)
    calls: list[Any] = []

    def failing(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        if len(calls) == call:
            raise Crash
        return original(*args, **kwargs)

    monkeypatch.setattr(rollup_compute, name, failing)
    return calls


def dirty_keys() -> set[tuple[int, int, datetime]]:
    return set(DirtyBucket.objects.values_list("pipeline_id", "resolution", "bucket_start"))


def test_a_crash_on_the_second_bucket_rolls_back_the_first_and_keeps_the_dirty_rows(
    world: TeamWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    rag, rag_stages = make_rollup_pipeline(world.team, "rag", stages=2)
    agent, agent_stages = make_rollup_pipeline(world.team, "agent", stages=2)
    rng = np.random.default_rng(1)
    rag_traces = add_random_traces(
        rag, rag_stages, rng=rng, n=30, from_ns=NEW_YEAR_S * S, span_s=10
    )
    agent_traces = add_random_traces(
        agent, agent_stages, rng=rng, n=30, from_ns=NEW_YEAR_S * S, span_s=10
    )
    rollups_process_dirty(now=SOON_AFTER)
    before = snapshot([rag.pk, agent.pk])
    # Late data for both pipelines, then a worker that dies on the second bucket.
    late = [(rag_traces[0], rag, rag_stages), (agent_traces[0], agent, agent_stages)]
    for trace, pipeline, stages in late:
        assert trace.start_ns is not None
        refinalize(
            trace, pipeline=pipeline, start_ns=trace.start_ns, e2e_ns=50_000 * MS,
            stages={stages[0]: (40_000 * MS, 40_000 * MS, False)},
        )  # fmt: skip
    pending = dirty_keys()
    calls = crash_on_call(monkeypatch, "rows_from_samples", call=2)

    with pytest.raises(Crash):
        rollups_process_dirty(now=SOON_AFTER)

    assert len(calls) == 2  # the first pipeline's bucket was rewritten, then rolled back
    assert snapshot([rag.pk, agent.pk]) == before
    assert dirty_keys() == pending

    monkeypatch.undo()
    rollups_process_dirty(now=SOON_AFTER)
    assert not DirtyBucket.objects.exists()
    assert assert_rollups_exact(rag)
    assert assert_rollups_exact(agent)


def test_a_crash_in_the_minute_pass_keeps_the_committed_ten_second_pass(
    world: TeamWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipeline, stages = make_rollup_pipeline(world.team, "rag", stages=2)
    add_random_traces(
        pipeline, stages, rng=np.random.default_rng(2), n=40, from_ns=NEW_YEAR_S * S, span_s=30
    )
    crash_on_call(monkeypatch, "rows_from_children", call=1)

    with pytest.raises(Crash):
        rollups_process_dirty(now=SOON_AFTER)

    assert RollupBucket.objects.filter(resolution=10).exists()
    assert not RollupBucket.objects.exclude(resolution=10).exists()
    assert {resolution for _, resolution, _ in dirty_keys()} == {60}
    assert_rollups_exact(pipeline, resolutions=(10,))

    monkeypatch.undo()
    rollups_process_dirty(now=SOON_AFTER)
    assert not DirtyBucket.objects.exists()
    assert assert_rollups_exact(pipeline)


def test_a_crash_while_writing_rows_leaves_no_half_written_bucket(
    world: TeamWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipeline, stages = make_rollup_pipeline(world.team, "rag", stages=3)
    add_random_traces(
        pipeline, stages, rng=np.random.default_rng(4), n=20, from_ns=NEW_YEAR_S * S, span_s=5
    )
    original = RollupBucket.objects.bulk_create

    def write_some_then_die(rows: list[RollupBucket], **kwargs: Any) -> Any:
        original(rows[:3], **kwargs)
        raise Crash

    monkeypatch.setattr(RollupBucket.objects, "bulk_create", write_some_then_die)
    with pytest.raises(Crash):
        rollups_process_dirty(now=SOON_AFTER)
    assert not RollupBucket.objects.exists()

    monkeypatch.undo()
    rollups_process_dirty(now=SOON_AFTER)
    assert assert_rollups_exact(pipeline)
