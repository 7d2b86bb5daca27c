"""The recompute API beside the pipeline's: start one, read its progress; roles and teams."""

from typing import Any

import numpy as np
import pytest
import yaml
from django.test import Client

from apps.analysis.models import Recompute
from apps.analysis.services.recompute import recompute_request, recompute_step
from apps.core.api.parsers import MAX_BODY_BYTES
from tests.builders.api import error_of, token_client
from tests.builders.configuration import make_pipeline
from tests.builders.recompute_traces import (
    ChatPipeline,
    chat_pipeline,
    chat_traces,
    rules_b,
    send,
)
from tests.conftest import TeamWorld

URL = "/api/v1/pipelines/rag-chat/recompute/"


@pytest.fixture
def chat(world: TeamWorld) -> ChatPipeline:
    """Eight traces of the last hour analysed under rules A; the rules are now B."""
    chat = chat_pipeline(world.team)
    rng = np.random.default_rng(3)
    send(world.team, chat_traces(rng, count=8, first_id=1, minutes_ago=(40, 5)))
    rules_b(chat)
    return chat


def test_a_writer_starts_a_recompute_and_reads_its_progress(
    world: TeamWorld, chat: ChatPipeline
) -> None:
    client = token_client(world.editor)

    started = client.post(URL, {"hours": 1}, format="json")

    assert started.status_code == 202, started.content
    body = started.json()
    run = Recompute.objects.get()
    assert body["id"] == run.pk
    assert (body["status"], body["hours"], body["joined"]) == ("queued", 1, False)
    assert body["poll"] == f"{URL}{run.pk}/?team=acme"
    assert started["Location"] == body["poll"]
    assert started["Retry-After"] == "2"
    assert body["requested_by"] == "eddie"

    recompute_step(run_id=run.pk)
    polled = client.get(body["poll"])
    state = client.get(URL).json()

    assert polled.status_code == 200
    progress = polled.json()
    assert (progress["status"], progress["total"], progress["done"]) == ("finished", 8, 8)
    assert (progress["skipped"], progress["expired"], progress["failed"]) == (0, 0, 0)
    assert progress["percent"] == 100
    assert progress["window_cut"] is False
    assert state["run"]["id"] == run.pk
    assert state["hours_offered"] == [1, 3, 6, 12, 24]
    assert state["rules_changed_at"] is not None
    assert state["earlier_rules_until"] == progress["window_start"]


def test_asking_again_joins_and_another_pipeline_of_the_account_gets_409(
    world: TeamWorld, chat: ChatPipeline
) -> None:
    make_pipeline(world.team, "agent")
    client = token_client(world.owner)
    first = client.post(URL, {"hours": 3}, format="json").json()

    again = client.post(URL, {"hours": 1}, format="json")
    other = client.post("/api/v1/pipelines/agent/recompute/", {"hours": 1}, format="json")

    assert again.status_code == 202
    assert (again.json()["id"], again.json()["joined"]) == (first["id"], True)
    assert other.status_code == 409
    assert error_of(other)["code"] == "recompute_running"
    assert "“Rag chat” is being recomputed" in error_of(other)["message"]
    assert Recompute.objects.count() == 1


@pytest.mark.parametrize(
    "payload",
    [{}, {"hours": "abc"}, {"hours": 25}, {"hours": 2}, {"hours": -1}, {"hours": None},
     {"hours": [1]}, {"hours": 10**30}, [1]],
)  # fmt: skip
def test_hours_not_offered_are_a_400_and_start_nothing(
    world: TeamWorld, chat: ChatPipeline, payload: Any
) -> None:
    response = token_client(world.owner).post(URL, payload, format="json")

    assert response.status_code == 400, response.content
    assert not Recompute.objects.exists()


def test_an_oversized_body_is_a_413(world: TeamWorld, chat: ChatPipeline) -> None:
    payload = {"hours": 1, "note": "n" * (MAX_BODY_BYTES + 1)}
    response = token_client(world.owner).post(URL, payload, format="json")
    assert response.status_code == 413
    assert not Recompute.objects.exists()


def test_a_viewer_reads_progress_but_cannot_start_one(world: TeamWorld, chat: ChatPipeline) -> None:
    run = recompute_request(pipeline=chat.pipeline, hours=1, user=world.owner).run
    client = token_client(world.viewer)

    refused = client.post(URL, {"hours": 1}, format="json")

    assert refused.status_code == 403
    assert client.get(URL).json()["run"]["id"] == run.pk
    assert client.get(f"{URL}{run.pk}/").status_code == 200
    assert Recompute.objects.count() == 1


def test_an_outsider_gets_404_for_the_pipeline_and_its_runs(
    world: TeamWorld, chat: ChatPipeline
) -> None:
    theirs = chat_pipeline(world.other_team)  # the same slug in globex
    run = recompute_request(pipeline=chat.pipeline, hours=1, user=world.owner).run
    outsider = token_client(world.outsider)

    assert outsider.get(URL + "?team=acme").status_code == 404
    assert outsider.post(URL + "?team=acme", {"hours": 1}, format="json").status_code == 404
    assert outsider.get(f"{URL}{run.pk}/?team=acme").status_code == 404
    # In their own team, acme's run id names nothing.
    assert outsider.get(f"{URL}{run.pk}/").status_code == 404
    assert outsider.get(URL).json()["run"] is None
    assert Recompute.objects.filter(pipeline=theirs.pipeline).count() == 0
    assert Client().get(URL).status_code == 401


def test_the_schema_has_both_endpoints_with_their_errors(db: None) -> None:
    schema = yaml.safe_load(Client().get("/api/schema/").content)
    paths = schema["paths"]
    recompute = paths["/api/v1/pipelines/{pipeline_slug}/recompute/"]
    assert set(recompute) == {"get", "post"}
    assert {"202", "400", "403", "404", "409", "429"} <= set(recompute["post"]["responses"])
    assert "get" in paths["/api/v1/pipelines/{pipeline_slug}/recompute/{run_id}/"]


def test_the_endpoints_share_the_apis_allowance(
    world: TeamWorld, chat: ChatPipeline, settings: Any, clean_cache: None, allowance_clock: float
) -> None:
    settings.API_REQUESTS_PER_MINUTE_PER_TOKEN = 3
    client = token_client(world.owner)
    statuses = [client.get(URL).status_code for _ in range(3)]
    statuses.append(client.post(URL, {"hours": 1}, format="json").status_code)
    assert statuses == [200, 200, 200, 429]
    assert not Recompute.objects.exists()
