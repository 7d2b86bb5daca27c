"""Concurrent rollup runs on PostgreSQL: separate connections through threads.

Runs share dirty rows through ``FOR UPDATE SKIP LOCKED``; a parent bucket marked
while another run holds it is redone with the new children.
"""

import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest
from django.db import connection

from apps.analysis.models import DirtyBucket
from apps.rollups.services import bucket_compute as rollup_compute
from apps.rollups.services.bucket_pass import RollupResult, rollups_process_dirty
from tests.builders.samples_and_rollups import (
    NEW_YEAR_S,
    add_random_traces,
    add_trace,
    assert_rollups_exact,
    make_rollup_pipeline,
)
from tests.conftest import TeamWorld
from tests.timing import MS, S

pytestmark = pytest.mark.django_db(transaction=True)

SOON_AFTER = datetime.fromtimestamp(NEW_YEAR_S + 600, tz=UTC)
WAIT_S = 20


class Run(threading.Thread):
    """One rollup call on its own connection."""

    def __init__(self, action: Callable[[], RollupResult]) -> None:
        super().__init__(daemon=True)
        self.action = action
        self.result: RollupResult | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = self.action()
        except BaseException as error:  # handed to the test thread
            self.error = error
        finally:
            connection.close()

    def outcome(self) -> RollupResult:
        self.join(WAIT_S)
        assert not self.is_alive()
        if self.error:
            raise self.error
        assert self.result is not None
        return self.result


def pause_first_caller(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> tuple[threading.Event, threading.Event, list[tuple[str, int, int]]]:
    """Make the first thread calling ``rollup_compute.<name>`` stop after computing,
    inside its transaction, until released; record who computed which buckets."""
    original = getattr(rollup_compute, name)
    inside, release = threading.Event(), threading.Event()
    calls: list[tuple[str, int, int]] = []
    lock = threading.Lock()

    def paused(pipeline: Any, resolution: int, starts: list[int]) -> Any:
        rows = original(pipeline, resolution, starts)
        with lock:
            first = not calls
            name = threading.current_thread().name
            calls.extend((name, pipeline.id, start) for start in starts)
        if first:
            inside.set()
            assert release.wait(WAIT_S)
        return rows

    monkeypatch.setattr(rollup_compute, name, paused)
    return inside, release, calls


def test_two_runs_never_claim_the_same_dirty_rows(
    world: TeamWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipelines = [make_rollup_pipeline(world.team, f"p{i}", stages=2) for i in range(4)]
    rng = np.random.default_rng(8)
    for pipeline, stages in pipelines:
        add_random_traces(pipeline, stages, rng=rng, n=40, from_ns=NEW_YEAR_S * S, span_s=40)
    assert DirtyBucket.objects.filter(resolution=10).count() == 16
    inside, release, calls = pause_first_caller(monkeypatch, "rows_from_samples")

    first = Run(lambda: rollups_process_dirty(limit=6, now=SOON_AFTER))
    first.start()
    assert inside.wait(WAIT_S)
    # The first run holds 6 claimed rows; the second takes the other 10 meanwhile.
    second = rollups_process_dirty(limit=100, now=SOON_AFTER)
    release.set()
    first_result = first.outcome()

    assert (first_result.claimed[10], second.claimed[10]) == (6, 10)
    buckets = [(pipeline_id, start) for _, pipeline_id, start in calls]
    assert len(buckets) == len(set(buckets)) == 16
    assert {name for name, _, _ in calls} == {first.name, threading.current_thread().name}
    while rollups_process_dirty(now=SOON_AFTER).buckets:
        pass
    for pipeline, _ in pipelines:
        assert assert_rollups_exact(pipeline)


def test_a_parent_marked_while_another_run_holds_it_is_redone_with_the_new_child(
    world: TeamWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipeline, [stage] = make_rollup_pipeline(world.team, "rag", stages=1)
    start = NEW_YEAR_S * S
    add_trace(pipeline, start, 100 * MS, {stage: (10 * MS, 10 * MS, False)})
    while rollups_process_dirty(now=SOON_AFTER).buckets:
        pass
    minute = datetime.fromtimestamp(NEW_YEAR_S, tz=UTC)
    DirtyBucket.objects.create(pipeline_id=pipeline.pk, resolution=60, bucket_start=minute)
    inside, release, _ = pause_first_caller(monkeypatch, "rows_from_children")

    # The first run has merged the minute's children and holds the minute's row.
    holder = Run(lambda: rollups_process_dirty(now=SOON_AFTER))
    holder.start()
    assert inside.wait(WAIT_S)
    # A late trace lands in a child of that minute; a second run rolls it up.
    add_trace(pipeline, start + 30 * S, 700 * MS, {stage: (20 * MS, 20 * MS, False)})
    child = Run(lambda: rollups_process_dirty(now=SOON_AFTER))
    child.start()
    child.join(1)
    assert child.is_alive()  # its parent mark waits for the holder's transaction
    release.set()
    holder.outcome()
    child.outcome()

    while rollups_process_dirty(now=SOON_AFTER).buckets:
        pass
    assert assert_rollups_exact(pipeline)


def test_a_trace_finalized_while_a_run_holds_its_bucket_is_rolled_up_afterwards(
    world: TeamWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipeline, [stage] = make_rollup_pipeline(world.team, "rag", stages=1)
    start = NEW_YEAR_S * S
    add_trace(pipeline, start, 100 * MS, {stage: (10 * MS, 10 * MS, False)})
    inside, release, _ = pause_first_caller(monkeypatch, "rows_from_samples")

    # The run has read the bucket's samples and still holds its dirty row.
    holder = Run(lambda: rollups_process_dirty(now=SOON_AFTER))
    holder.start()
    assert inside.wait(WAIT_S)
    # Finalization marks the same bucket (written directly; its commit order matters).

    def finalize_late_trace() -> None:
        add_trace(pipeline, start + S, 700 * MS, {stage: (20 * MS, 20 * MS, False)})
        connection.close()

    finalizing = threading.Thread(target=finalize_late_trace, daemon=True)
    finalizing.start()
    finalizing.join(1)
    release.set()
    holder.outcome()
    finalizing.join(WAIT_S)

    while rollups_process_dirty(now=SOON_AFTER).buckets:
        pass
    assert assert_rollups_exact(pipeline)
