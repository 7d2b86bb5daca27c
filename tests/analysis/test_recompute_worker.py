"""A recompute asked for on the page, run by a real worker process through the broker;
its pool process killed half way, as the kernel's OOM killer would."""

import os
import signal
from pathlib import Path

import numpy as np
import pytest

from apps.analysis.models import Recompute, RecomputeStatus
from apps.core.models import CrashStrike
from tests.builders.recompute_traces import (
    chat_pipeline,
    chat_traces,
    everything_of,
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
from tests.conftest import TeamWorld, client_for
from tests.processes import celery_worker, pool_children, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

START = "/teams/acme/dashboards/rag-chat/recompute/start/"


def test_a_worker_recomputes_across_the_queue_and_a_killed_one_doubles_nothing(
    world: TeamWorld, tmp_path: Path
) -> None:
    rng = np.random.default_rng(17)
    chat = chat_pipeline(world.team)
    globex = chat_pipeline(world.other_team)
    traces = chat_traces(rng, count=300, first_id=1, minutes_ago=(55, 2))
    send(world.team, traces)
    send(world.other_team, chat_traces(rng, count=20, first_id=5000, minutes_ago=(55, 2)))
    rules_b(chat)
    rules_b(globex)  # changed, never recomputed
    untouched = everything_of(globex.pipeline)
    log = tmp_path / "worker.log"

    def run() -> Recompute:
        return Recompute.objects.get()

    # One trace (five spans) a batch, each its own commit: the kill lands mid-run.
    with celery_worker(log, queues="whatif", env={"ANALYSIS_PASS_MAX_SPANS": "5"}) as worker:
        response = client_for(world.owner).post(
            START, {"hours": "1"}, headers={"HX-Request": "true"}
        )
        assert response.status_code == 200
        assert wait_for(lambda: run().done >= 5, timeout=60), log.read_text()[-4000:]
        [pool] = pool_children(worker.pid)
        os.kill(pool, signal.SIGKILL)
        killed_at = run().done
        finished = wait_for(lambda: run().status == RecomputeStatus.FINISHED, timeout=180)
        assert finished, log.read_text()[-4000:]

    text = log.read_text()
    assert killed_at < 300, "the run ended before the kill: nothing was shown"
    assert "apps.analysis.tasks.recompute_pipeline" in text
    assert "SIGKILL" in text  # the pool process did die, and its task went on elsewhere
    done = run()
    assert (done.total, done.done, done.skipped, done.expired, done.failed) == (300, 300, 0, 0, 0)
    assert not CrashStrike.objects.exists()
    rollups_settle()
    assert stored_samples(chat.pipeline) == wanted_samples(chat, traces, expected_b)
    assert stored_untracked(chat.pipeline) == wanted_untracked(chat, traces, expected_b)
    assert_rollups_exact(chat.pipeline)
    assert everything_of(globex.pipeline) == untouched
