"""``GET /v1/budgets/{pipeline}``: the runtime document a client reads, by metrics token.

Figures are checked against exact nearest-rank percentiles of hand-made traces (the
sketches' 1 %); access against the team's own token, another team's, a personal API
token, an ingest token, revoked and malformed ones."""

import time
from typing import Any

import numpy as np
import pytest
from django.test import Client, override_settings

from apps.teams.services import (
    api_token_create,
    ingest_token_create,
    metrics_token_create,
    metrics_token_revoke,
)
from tests.builders.api import ApiWorld, error_of
from tests.builders.bucket_rows import HandTrace, nearest_rank, store_rollups
from tests.builders.configuration import make_stage
from tests.timing import MS

URL = "/v1/budgets/rag-chat"


def token_of(team: Any) -> str:
    _, raw = metrics_token_create(team=team, name="app", created_by=None)
    return raw


def get(url: str, token: str | None, **headers: str) -> Any:
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return Client().get(url, headers=headers)


def recent_traces(api: ApiWorld, count: int = 400) -> list[HandTrace]:
    rng = np.random.default_rng(7)
    now = int(time.time())
    traces = []
    for index in range(count):
        retrieval = int(rng.lognormal(np.log(150), 0.4) * MS)
        generation = int(rng.lognormal(np.log(800), 0.2) * MS)
        traces.append(
            HandTrace(
                # Spread over the last ten minutes, clear of the unfinished 10 s bucket.
                start=now - 30 - index * 600 // count,
                e2e_ns=retrieval + generation + 5 * MS,
                stages={
                    api.retrieval.pk: (retrieval, retrieval),
                    api.generation.pk: (generation, generation),
                },
            )
        )
    return traces


@pytest.fixture(autouse=True)
def _uncached(settings: Any) -> None:
    settings.RUNTIME_DOCUMENT_CACHE_SECONDS = 0


def test_the_teams_own_token_reads_its_pipelines_budgets_and_observed_times(api: ApiWorld) -> None:
    traces = recent_traces(api)
    store_rollups(api.pipeline, traces)
    response = get(URL, token_of(api.world.team))
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response["Cache-Control"] == "private, max-age=30"
    document = response.json()
    assert document["version"] == 1
    assert document["pipeline"] == "rag-chat"
    # No objective: the highest budgeted percentile is the deadline.
    assert document["deadline_ms"] == 4000
    assert document["budget"] == {"p95": 2500, "p99": 4000}
    assert document["objective"] is None
    assert document["refresh_s"] == 30
    assert [s["stage"] for s in document["stages"]] == ["retrieval", "generation"]
    assert [s["position"] for s in document["stages"]] == [0, 1]
    assert document["stages"][0]["budget"] == {"percentile": "p95", "ms": 400}
    assert document["stages"][1]["budget"] == {"percentile": "p99", "ms": 1500}
    assert document["observed"]["window_s"] == 900
    assert document["observed"]["count"] == len(traces)
    expected = {
        "e2e": [t.e2e_ns / MS for t in traces],
        "retrieval": [t.stages[api.retrieval.pk][0] / MS for t in traces],
        "generation": [t.stages[api.generation.pk][0] / MS for t in traces],
    }
    observed = {
        "e2e": document["observed"],
        **{s["stage"]: s["observed"] for s in document["stages"]},
    }
    for name, values in expected.items():
        assert observed[name]["count"] == len(traces)
        for percentile, q in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99)):
            exact = nearest_rank(values, q)
            assert observed[name][percentile] == pytest.approx(exact, rel=0.011), (name, q)


def test_an_objective_gives_the_deadline_and_a_stage_without_budget_has_none(
    api: ApiWorld,
) -> None:
    api.pipeline.objective_target = 99
    api.pipeline.objective_threshold_ms = 5000
    api.pipeline.save()
    make_stage(api.pipeline, "rerank", position=5, budget_ms=None)
    document = get(URL, token_of(api.world.team)).json()
    assert document["deadline_ms"] == 5000
    assert document["objective"] == {"target": 99.0, "threshold_ms": 5000}
    rerank = document["stages"][-1]
    assert rerank == {
        "stage": "rerank",
        "position": 2,
        "budget": None,
        "observed": {"count": 0, "p50": None, "p95": None, "p99": None},
        "uncut": {"window_s": 3600, "count": 0, "p50": None, "p95": None, "p99": None},
        "degrade": {},
        "advice": {},
    }


def test_traffic_older_than_the_window_is_left_out(api: ApiWorld) -> None:
    old = [
        HandTrace(start=int(time.time()) - 3600, e2e_ns=100 * MS, stages={}),
    ]
    store_rollups(api.pipeline, old)
    document = get(URL, token_of(api.world.team)).json()
    assert document["observed"]["count"] == 0
    assert document["observed"]["p95"] is None


def test_the_same_document_answers_304_to_its_etag_and_200_once_it_changes(
    api: ApiWorld,
) -> None:
    token = token_of(api.world.team)
    first = get(URL, token)
    etag = first["ETag"]
    assert etag.startswith('"')
    assert etag.endswith('"')
    again = get(URL, token, **{"If-None-Match": etag})
    assert again.status_code == 304
    assert again.content == b""
    assert again["ETag"] == etag
    assert get(URL, token, **{"If-None-Match": '"other", ' + etag}).status_code == 304
    assert get(URL, token, **{"If-None-Match": '"stale"'}).status_code == 200
    api.retrieval.budget_ms = 300
    api.retrieval.save()
    changed = get(URL, token, **{"If-None-Match": etag})
    assert changed.status_code == 200
    assert changed["ETag"] != etag
    assert changed.json()["stages"][0]["budget"]["ms"] == 300


def test_another_teams_token_gets_404_for_a_pipeline_of_the_same_slug(api: ApiWorld) -> None:
    theirs = get(URL, token_of(api.world.other_team))
    assert theirs.status_code == 200
    # Their own pipeline of that slug, never ours.
    assert [s["stage"] for s in theirs.json()["stages"]] == ["retrieval"]
    assert theirs.json()["budget"] != {"p95": 2500, "p99": 4000}
    api.other_pipeline.delete()
    response = get(URL, token_of(api.world.other_team))
    assert response.status_code == 404
    assert error_of(response)["code"] == "not_found"


def test_an_unknown_pipeline_gets_404(api: ApiWorld) -> None:
    assert get("/v1/budgets/nope", token_of(api.world.team)).status_code == 404


@pytest.mark.parametrize(
    "token",
    [None, "lbm_not-a-token", "Bearer", "x" * 5000],
    ids=["missing", "unknown", "garbage", "oversized"],
)
def test_a_missing_or_unknown_token_gets_401(api: ApiWorld, token: str | None) -> None:
    response = get(URL, token)
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_a_personal_api_token_an_ingest_token_and_a_revoked_one_get_401(api: ApiWorld) -> None:
    _, personal = api_token_create(user=api.world.owner, name="me")
    assert "personal API token" in error_of(get(URL, personal))["message"]
    _, ingest = ingest_token_create(team=api.world.team, name="app", created_by=None)
    refused = get(URL, ingest)
    assert refused.status_code == 401
    assert "ingest token can only send spans" in error_of(refused)["message"]
    token, raw = metrics_token_create(team=api.world.team, name="old", created_by=None)
    metrics_token_revoke(token=token)
    assert get(URL, raw).status_code == 401


def test_writes_are_refused(api: ApiWorld) -> None:
    response = Client().post(URL, HTTP_AUTHORIZATION=f"Bearer {token_of(api.world.team)}")
    assert response.status_code == 405


@override_settings(RUNTIME_REQUESTS_PER_MINUTE_PER_ACCOUNT=3)
def test_an_account_past_its_allowance_gets_429_and_another_account_does_not(
    api: ApiWorld,
) -> None:
    ours, theirs = token_of(api.world.team), token_of(api.world.other_team)
    answers = [get(URL, ours).status_code for _ in range(4)]
    assert answers == [200, 200, 200, 429]
    refused = get(URL, ours)
    assert int(refused["Retry-After"]) >= 1
    assert "RUNTIME_REQUESTS_PER_MINUTE_PER_ACCOUNT" in error_of(refused)["message"]
    assert get(URL, theirs).status_code == 200


def test_the_document_is_computed_once_for_every_client_within_its_seconds(
    api: ApiWorld, settings: Any
) -> None:
    settings.RUNTIME_DOCUMENT_CACHE_SECONDS = 10
    token = token_of(api.world.team)
    first = get(URL, token)
    store_rollups(api.pipeline, recent_traces(api, count=20))
    # Served from the cache: the traffic just stored shows at the next computation.
    assert get(URL, token).content == first.content
