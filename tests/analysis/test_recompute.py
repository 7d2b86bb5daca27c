"""Recompute: traces analysed under rules A, the rules changed to B, the window recomputed.

Known answers: each trace's stage samples and untracked time are worked out from its
spans by hand (see ``recompute_data``), and the rollups are compared with a direct
computation from those values.
"""

from datetime import timedelta
from typing import Any

import numpy as np
import pytest
from django.db import OperationalError, connection
from django.utils import timezone

from apps.analysis.models import Recompute, RecomputeStatus
from apps.analysis.selectors.recompute import earlier_rules_until, figures_predate_rules
from apps.analysis.services import recompute as recompute_service
from apps.analysis.services.recompute import StepOutcome, recompute_request, recompute_step
from apps.core.models import CrashStrike, PassKind, QuarantinedItem, QuarantineKind
from apps.core.time import NS_PER_MS, NS_PER_S, align_down, align_up
from apps.ingest.models import Trace, TraceState
from apps.rollups.selectors import pipeline_percentiles
from apps.rollups.sketches.ddsketch import Sketch
from tests.builders.recompute_traces import (
    ChatPipeline,
    ChatTrace,
    chat_pipeline,
    chat_traces,
    everything_of,
    expected_a,
    expected_b,
    rollups_settle,
    rules_b,
    send,
    stored_samples,
    stored_untracked,
    wanted_samples,
    wanted_untracked,
)
from tests.builders.samples_and_rollups import assert_rollups_exact
from tests.conftest import TeamWorld

pytestmark = pytest.mark.slow


def run_to_the_end(run_id: int, *, budget_s: float = 0) -> list[StepOutcome]:
    """Steps as the worker takes them, each a new task; a budget of 0 is one batch a step."""
    outcomes = []
    for _ in range(10_000):
        step = recompute_step(run_id=run_id, time_budget_s=budget_s)
        outcomes.append(step.outcome)
        if step.outcome == StepOutcome.WAIT:
            rollups_settle()  # the rollup pass the recompute waits for
        elif step.outcome not in (StepOutcome.MORE,):
            return outcomes
    raise AssertionError("the recompute never ended")


class Scene:
    """Three pipelines under rules A: rag-chat and agent of acme, rag-chat of globex."""

    def __init__(self, world: TeamWorld) -> None:
        rng = np.random.default_rng(28)
        self.world = world
        self.chat = chat_pipeline(world.team)
        self.agent = chat_pipeline(world.team, "agent", root="POST /agent")
        self.globex = chat_pipeline(world.other_team)
        # The last hour's traces, and older ones a one-hour recompute does not reach.
        self.recent = chat_traces(rng, count=60, first_id=1000, minutes_ago=(50, 2))
        self.older = chat_traces(rng, count=20, first_id=2000, minutes_ago=(100, 75))
        self.agent_traces = chat_traces(
            rng, count=25, first_id=3000, minutes_ago=(50, 2), root="POST /agent"
        )
        self.globex_traces = chat_traces(rng, count=30, first_id=4000, minutes_ago=(50, 2))
        send(world.team, self.recent + self.older + self.agent_traces)
        send(world.other_team, self.globex_traces)

    @property
    def all_chat(self) -> list[ChatTrace]:
        return self.recent + self.older


@pytest.fixture
def scene(world: TeamWorld) -> Scene:
    return Scene(world)


def samples_match(chat: ChatPipeline, b: list[ChatTrace], a: list[ChatTrace]) -> None:
    """The pipeline's samples and untracked times: rules B for ``b``, rules A for ``a``."""
    wanted = wanted_samples(chat, b, expected_b) | wanted_samples(chat, a, expected_a)
    assert stored_samples(chat.pipeline) == wanted
    untracked = wanted_untracked(chat, b, expected_b) | wanted_untracked(chat, a, expected_a)
    assert stored_untracked(chat.pipeline) == untracked


def test_a_recompute_gives_the_samples_and_rollup_percentiles_of_the_new_rules(
    scene: Scene, settings: Any
) -> None:
    chat = scene.chat
    samples_match(chat, [], scene.all_chat)  # rules A throughout, as analysed
    rules_b(chat)
    rules_b(scene.agent)  # changed too, but not recomputed
    untouched = everything_of(scene.agent.pipeline), everything_of(scene.globex.pipeline)
    # Two traces (10 spans) a batch: the run takes many batches, each its own commit.
    settings.ANALYSIS_PASS_MAX_SPANS = 12

    run = recompute_request(pipeline=chat.pipeline, hours=1, user=scene.world.owner).run
    outcomes = run_to_the_end(run.pk)
    rollups_settle()

    assert outcomes[-1] == StepOutcome.FINISHED
    assert outcomes.count(StepOutcome.MORE) >= 29
    samples_match(chat, scene.recent, scene.older)
    run.refresh_from_db()
    assert (run.status, run.total, run.done) == (RecomputeStatus.FINISHED, 60, 60)
    assert (run.skipped, run.expired, run.failed) == (0, 0, 0)
    assert assert_rollups_exact(chat.pipeline) > 0
    # The dashboard's percentiles over the hour equal the exact values under rules B,
    # within the sketch's 1 %, and its sketch equals one built from those values.
    now_s = int(timezone.now().timestamp())
    window = pipeline_percentiles(
        pipeline=chat.pipeline, start=align_down(now_s - 3600, 10), end=align_up(now_s, 10)
    )
    by_stage = {s.stage.pk: s for s in window.stages}
    for stage_id in (chat.retrieval.pk, chat.rerank.pk, chat.generation.pk):
        values = np.array([expected_b(chat, t)[0][stage_id][0] for t in scene.recent])
        wall = by_stage[stage_id].wall
        assert wall.count == len(values)
        assert wall.sketch == Sketch.from_values(values / NS_PER_MS)
        for quantile in (0.5, 0.95, 0.99):
            exact = np.sort(values)[int(np.ceil(quantile * len(values))) - 1] / NS_PER_MS
            assert wall.sketch.quantile(quantile) == pytest.approx(exact, rel=0.01)
    untracked_total = sum(expected_b(chat, t)[1] for t in scene.recent)
    assert window.untracked.sum_ns == untracked_total
    # Other pipelines of the team and other teams: exactly as they were.
    assert (everything_of(scene.agent.pipeline), everything_of(scene.globex.pipeline)) == untouched


def test_the_page_figures_before_the_window_still_predate_the_rules(scene: Scene) -> None:
    chat = scene.chat
    now_s = int(timezone.now().timestamp())
    two_hours = (now_s - 7200, now_s)
    # Its rules were made before its traces were analysed: no figure predates them,
    # though the traces started earlier (they are sent with past times).
    chat.pipeline.refresh_from_db()
    assert chat.pipeline.rules_changed_at is not None
    assert figures_predate_rules(pipeline=chat.pipeline, start=two_hours[0], end=now_s) is None
    rules_b(chat)
    chat.pipeline.refresh_from_db()
    changed = chat.pipeline.rules_changed_at
    assert figures_predate_rules(pipeline=chat.pipeline, start=two_hours[0], end=now_s) == changed

    run = recompute_request(pipeline=chat.pipeline, hours=1, user=None).run
    run_to_the_end(run.pk, budget_s=5)
    run.refresh_from_db()

    # The older traces keep rules A: the note now starts where the recompute did.
    assert earlier_rules_until(pipeline=chat.pipeline) == run.window_start
    assert (
        figures_predate_rules(pipeline=chat.pipeline, start=two_hours[0], end=now_s)
        == run.window_start
    )
    window_start_s = int(run.window_start.timestamp()) + 1
    assert figures_predate_rules(pipeline=chat.pipeline, start=window_start_s, end=now_s) is None


def test_recomputing_again_changes_nothing(scene: Scene) -> None:
    rules_b(scene.chat)
    first = recompute_request(pipeline=scene.chat.pipeline, hours=1, user=None).run
    run_to_the_end(first.pk, budget_s=5)
    rollups_settle()
    after_first = everything_of(scene.chat.pipeline)

    second = recompute_request(pipeline=scene.chat.pipeline, hours=1, user=None).run
    run_to_the_end(second.pk, budget_s=5)
    rollups_settle()

    assert second.pk != first.pk
    assert everything_of(scene.chat.pipeline) == after_first
    samples_match(scene.chat, scene.recent, scene.older)


class Crash(OperationalError):
    """The pass itself dies (a lost connection), after the batch wrote its rows."""


@pytest.fixture
def crash_on_batch(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Make the third batch raise once its samples are written, before it commits."""
    original = recompute_service.RecomputeBatch.write
    calls: list[int] = []

    def crashing(self: Any, group: Any) -> Any:
        written = original(self, group)
        calls.append(len(written))
        if len(calls) == 3:
            raise Crash("server closed the connection unexpectedly")
        return written

    monkeypatch.setattr(recompute_service.RecomputeBatch, "write", crashing)
    return calls


def test_a_batch_that_dies_before_its_commit_is_redone_and_nothing_counts_twice(
    scene: Scene, settings: Any, crash_on_batch: list[int]
) -> None:
    rules_b(scene.chat)
    settings.ANALYSIS_PASS_MAX_SPANS = 12
    run = recompute_request(pipeline=scene.chat.pipeline, hours=1, user=None).run

    with pytest.raises(Crash):
        run_to_the_end(run.pk)
    run.refresh_from_db()
    assert (run.status, run.done) == (RecomputeStatus.RUNNING, 4)  # two batches committed
    run_to_the_end(run.pk)
    rollups_settle()

    run.refresh_from_db()
    assert (run.status, run.total, run.done, run.skipped) == (RecomputeStatus.FINISHED, 60, 60, 0)
    assert sum(crash_on_batch) == 62  # the crashed batch's two traces, analysed again
    samples_match(scene.chat, scene.recent, scene.older)
    assert_rollups_exact(scene.chat.pipeline)
    assert not CrashStrike.objects.exists()  # it raised: not a dead worker


def test_a_trace_whose_batches_killed_their_workers_is_quarantined_and_the_rest_go_on(
    scene: Scene, settings: Any
) -> None:
    rules_b(scene.chat)
    victim = Trace.objects.get(trace_id=scene.recent[10].trace_id.to_bytes(16, "big"))
    # What two dead batches holding it leave behind (crash_guard turns dead claims into
    # strikes; tests/core/test_crash_guard.py shows it with real sessions).
    CrashStrike.objects.create(
        kind=PassKind.RECOMPUTE, item_id=victim.pk, strikes=settings.PASS_CRASH_STRIKES
    )
    run = recompute_request(pipeline=scene.chat.pipeline, hours=1, user=None).run

    run_to_the_end(run.pk, budget_s=5)

    run.refresh_from_db()
    assert (run.total, run.done, run.failed) == (60, 59, 1)
    victim.refresh_from_db()
    assert victim.state == TraceState.QUARANTINED
    held = QuarantinedItem.objects.get(kind=QuarantineKind.TRACE, item_id=victim.pk)
    assert "worker died" in held.reason
    # It keeps its rules-A samples until an operator releases it.
    others = [t for t in scene.recent if t.trace_id != scene.recent[10].trace_id]
    samples_match(scene.chat, others, [*scene.older, scene.recent[10]])
    assert not CrashStrike.objects.exists()


# Five traces of the hour lose their spans, the other 55 keep theirs: only PostgreSQL's
# table can lose a trace's spans alone (a store drops whole days, and this hour is one).
@pytest.mark.postgres_spans
def test_traces_whose_spans_are_gone_keep_their_figures_and_are_counted(scene: Scene) -> None:
    rules_b(scene.chat)
    gone = scene.recent[:5]
    pks = list(
        Trace.objects.filter(
            trace_id__in=[t.trace_id.to_bytes(16, "big") for t in gone]
        ).values_list("pk", flat=True)
    )
    with connection.cursor() as cursor:  # as if their day's partition had been dropped
        cursor.execute("DELETE FROM ingest_span WHERE trace_pk = ANY(%s)", [pks])
    run = recompute_request(pipeline=scene.chat.pipeline, hours=1, user=None).run

    run_to_the_end(run.pk, budget_s=5)

    run.refresh_from_db()
    assert (run.total, run.done, run.expired) == (60, 55, 5)
    samples_match(scene.chat, scene.recent[5:], [*scene.older, *gone])


def test_a_trace_opened_again_by_new_spans_is_left_to_finalization(scene: Scene) -> None:
    rules_b(scene.chat)
    run = recompute_request(pipeline=scene.chat.pipeline, hours=1, user=None).run
    last = scene.recent[-1]
    Trace.objects.filter(trace_id=last.trace_id.to_bytes(16, "big")).update(state=TraceState.OPEN)

    run_to_the_end(run.pk, budget_s=5)

    run.refresh_from_db()
    assert (run.status, run.total, run.done, run.skipped) == (
        RecomputeStatus.FINISHED, 59, 59, 0,
    )  # fmt: skip
    assert run.handled == run.total


def test_a_deleted_pipeline_ends_its_recompute(scene: Scene) -> None:
    run = recompute_request(pipeline=scene.chat.pipeline, hours=1, user=None).run
    scene.chat.pipeline.delete()

    assert recompute_step(run_id=run.pk).outcome == StepOutcome.GONE
    assert not Recompute.objects.filter(pk=run.pk).exists()


def test_the_window_is_trace_start_in_the_hours_asked(scene: Scene) -> None:
    run = recompute_request(pipeline=scene.chat.pipeline, hours=1, user=None).run
    starts = Trace.objects.filter(pipeline=scene.chat.pipeline).values_list("start_ns", flat=True)
    low = int(run.window_start.timestamp() * NS_PER_S)
    assert sum(1 for s in starts if s is not None and s >= low) == 60
    assert run.window_end - run.window_start == timedelta(hours=1)
