import uuid
from pathlib import Path

import pytest

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
