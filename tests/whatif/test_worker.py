"""What-if runs computed by a real worker process, through the broker, as in production."""

import time
from pathlib import Path
from typing import Any

import pytest

from apps.pipelines.models import Stage
from tests.builders.api import token_client
from tests.processes import celery_worker, wait_for
from tests.whatif.conftest import Chat

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

URL = "/api/v1/pipelines/rag-chat/whatif"


def poll(client: Any, url: str, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        response = client.get(url)
        if response.status_code != 202 or time.monotonic() > deadline:
            return response
        time.sleep(0.2)


def test_a_worker_computes_the_replay_and_a_failing_run_stops_no_other(
    chat: Chat, tmp_path: Path
) -> None:
    acme, globex = token_client(chat.world.owner), token_client(chat.world.outsider)
    log = tmp_path / "worker.log"
    with celery_worker(log, queues="whatif"):
        # acme's run fails in the worker: its stage is renamed once the run is asked.
        change = {"changes": [{"stage": "rerank", "op": "remove"}]}
        doomed = acme.post(URL + "?team=acme", change, format="json")
        Stage.objects.filter(pipeline=chat.pipeline, slug="rerank").update(slug="gone")
        served = globex.post(URL, {"changes": [{"stage": "rerank", "op": "remove"}]}, format="json")

        failed = doomed if doomed.status_code != 202 else poll(acme, doomed.json()["poll"])
        answered = served if served.status_code != 202 else poll(globex, served.json()["poll"])
        levers = globex.get("/api/v1/pipelines/rag-chat/levers")
        levers = levers if levers.status_code != 202 else poll(globex, levers.json()["poll"])
        assert wait_for(lambda: "compute_whatif_run" in log.read_text(), timeout=10)

    text = log.read_text()
    assert failed.status_code in (200, 422), text[-4000:]  # 200 if it ran before the rename
    assert answered.status_code == 200, text[-4000:]
    assert answered.json()["traces"] == 50
    assert answered.json()["headline"]["saving_ms"] > 0
    assert levers.status_code == 200, text[-4000:]
    assert levers.json()["sensitivity"]
