import uuid
from pathlib import Path

import pytest
from django.db import connection

from apps.core.models import WorkerHeartbeat
from apps.core.tasks import record_heartbeat
from tests.processes import celery_worker, wait_for


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_process_consumes_a_task_from_the_broker(tmp_path: Path) -> None:
    hostname = f"probe-{uuid.uuid4().hex[:8]}"
    log = tmp_path / "worker.log"
    with celery_worker(log):
        record_heartbeat.apply_async(kwargs={"hostname": hostname})
        done = wait_for(
            lambda: WorkerHeartbeat.objects.filter(hostname=hostname).exists(), timeout=60
        )
    assert done, f"the worker did not run the task; its log:\n{log.read_text()[-4000:]}"
    assert "apps.core.tasks.record_heartbeat" in log.read_text()


def _other_backends() -> set[int]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
        )
        return {pid for (pid,) in cursor.fetchall()}


def _heartbeat(hostname: str) -> bool:
    record_heartbeat.apply_async(kwargs={"hostname": hostname})
    return wait_for(lambda: WorkerHeartbeat.objects.filter(hostname=hostname).exists(), timeout=60)


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_worker_keeps_its_database_connection_and_replaces_a_broken_one(
    tmp_path: Path,
) -> None:
    from budgets_site.celery import app

    # Messages earlier tests left in the shared broker (confirmation e-mails queued on
    # commit, say) would run between our heartbeats and could hold the connection at
    # the moment it is terminated; this test is about an idle worker.
    app.control.purge()
    log = tmp_path / "worker.log"
    with celery_worker(log):
        assert _heartbeat("first"), log.read_text()[-4000:]
        after_first = _other_backends()
        assert _heartbeat("second"), log.read_text()[-4000:]
        after_second = _other_backends()
        # One connection served both tasks and outlived them (Celery alone would close
        # it after each task and open another for the next).
        assert len(after_first) == 1
        assert after_second == after_first
        # A connection that broke between tasks is replaced before the next one runs.
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [after_first.pop()])
        assert _heartbeat("third"), log.read_text()[-4000:]
        assert _other_backends().isdisjoint(after_second)
    assert "OperationalError" not in log.read_text()


@pytest.mark.parametrize(
    ("task", "queue"),
    [
        ("apps.ingest.tasks.drain_raw_batches", "ingest"),
        # Analysis shares the ingest queue: in the rollup queue, a busy finalize run each
        # second would hold the rollup passes behind it until they expired.
        ("apps.analysis.tasks.finalize_quiet_traces", "ingest"),
        # A recompute's steps analyse stored traces again, like what-if replays: never in
        # front of fresh traces.
        ("apps.analysis.tasks.recompute_pipeline", "whatif"),
        ("apps.analysis.tasks.resume_recomputes", "ingest"),
        ("apps.rollups.tasks.process_dirty_rollups", "rollup"),
        ("apps.rollups.tasks.evaluate_budgets", "rollup"),
        ("apps.core.tasks.record_heartbeat", "rollup"),
    ],
)
def test_tasks_are_routed_to_their_queues(task: str, queue: str) -> None:
    from budgets_site.celery import app

    assert app.amqp.router.route({}, task)["queue"].name == queue
