"""The what-if and levers API: answers checked against the stored traces, access, bad input."""

from typing import Any

import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.analysis.models import StageSample
from apps.ingest.models import Trace
from apps.pipelines.models import Stage
from apps.whatif.models import RunKind, RunStatus, SavedScenario, WhatIfRun
from apps.whatif.services import whatif_run_compute
from tests.builders.api import error_of, token_client
from tests.builders.configuration import make_team
from tests.builders.demo_traffic import rag_pipeline
from tests.timing import MS
from tests.whatif.conftest import Chat

pytestmark = pytest.mark.django_db(transaction=True)

URL = "/api/v1/pipelines/rag-chat/whatif"
LEVERS = "/api/v1/pipelines/rag-chat/levers"
SCENARIOS = "/api/v1/pipelines/rag-chat/scenarios"
FIVE_CHANGES: list[dict[str, Any]] = [
    {"stage": "rerank", "op": "remove"},
    {"stage": "history", "op": "parallel", "with": "rewrite"},
    {"stage": "retrieval", "op": "cache", "hit_ratio": 0.4, "hit_ms": 20},
    {"stage": "generation", "op": "scale", "factor": 0.8},
    {"stage": "tool", "op": "cap", "ms": 500},
]


def nearest_rank_ms(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[max(int(np.ceil(q * len(ordered))), 1) - 1], 1)


def ask(chat: Chat, user: Any, changes: Any, **extra: Any) -> Any:
    body = {**chat.window, "changes": changes, **extra}
    if "window" in extra:
        body.pop("from")
        body.pop("to")
    return token_client(user).post(URL + "?team=acme", body, format="json")


def test_the_owner_gets_before_and_after_of_every_trace_of_the_window(
    chat: Chat, eager: None
) -> None:
    response = ask(chat, chat.world.owner, FIVE_CHANGES)

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "done"
    assert body["traces"] == body["traces_in_window"] == chat.sent.traces
    assert {s["slug"] for s in body["before"]["stages"]} >= {"rerank", "generation", "tool"}
    assert body["headline"]["saving_ms"] > 0
    after = {s["slug"]: s for s in body["after"]["stages"]}
    assert after["rerank"]["p99"] == 0.0  # removed
    assert after["tool"]["max"] <= 500.0 * 2 + 5  # capped: at most two calls, and the gap
    for side in ("before", "after"):
        for p in ("p50", "p95", "p99"):
            low, high = body[side]["e2e"]["intervals"][p]
            assert low <= body[side]["e2e"][p] <= high


def test_a_replay_without_changes_gives_the_stored_traces_own_percentiles(
    chat: Chat, eager: None
) -> None:
    body = ask(chat, chat.world.owner, []).json()

    traces = Trace.objects.filter(pipeline=chat.pipeline)
    e2e = [(t.end_ns - t.start_ns) / MS for t in traces if t.start_ns and t.end_ns]
    for p, q in {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99}.items():
        assert body["before"]["e2e"][p] == body["after"]["e2e"][p] == nearest_rank_ms(e2e, q)
    for stage in Stage.objects.filter(pipeline=chat.pipeline):
        walls = list(
            StageSample.objects.filter(stage_id=stage.pk).values_list("wall_ns", flat=True)
        )
        row = next(s for s in body["before"]["stages"] if s["slug"] == stage.slug)
        assert row["count"] == len(walls)
        if walls:
            assert row["p95"] == nearest_rank_ms([w / MS for w in walls], 0.95)
    assert body["headline"]["saving_ms"] == 0.0


def test_the_same_question_reuses_its_run(chat: Chat, eager: None) -> None:
    first = ask(chat, chat.world.owner, FIVE_CHANGES).json()
    again = ask(chat, chat.world.editor, list(reversed(FIVE_CHANGES))).json()

    assert first["run"] == again["run"]
    assert WhatIfRun.objects.count() == 1
    # A second delivery of the task finds the run done and leaves it alone.
    assert whatif_run_compute(run_id=first["run"]) == "skipped"


def test_a_viewer_may_ask_but_an_outsider_gets_404(chat: Chat, eager: None) -> None:
    assert ask(chat, chat.world.viewer, FIVE_CHANGES).status_code == 200
    outsider = token_client(chat.world.outsider).post(
        URL + "?team=acme", {**chat.window, "changes": []}, format="json"
    )
    assert outsider.status_code == 404


def test_the_outsider_replays_their_own_pipeline_of_the_same_slug_only(
    chat: Chat, eager: None
) -> None:
    response = token_client(chat.world.outsider).post(
        URL, {**chat.window, "changes": []}, format="json"
    )

    assert response.status_code == 200
    assert response.json()["traces"] == 50


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ([{"stage": "nope", "op": "remove"}], "one of this pipeline's stages"),
        ([{"stage": "rerank", "op": "explode"}], "op"),
        ([{"stage": "rerank", "op": "scale"}], "factor"),
        ([{"stage": "rerank", "op": "scale", "factor": -1}], "factor"),
        ([{"stage": "rerank", "op": "cache", "hit_ratio": 2, "hit_ms": 5}], "hit_ratio"),
        ([{"stage": "rerank", "op": "parallel"}], "with"),
        ([{"stage": "rerank", "op": "parallel", "with": "nope"}], "with"),
        ([{"stage": "rerank", "op": "cap"}], "cap takes"),
        ([{"stage": "rerank", "op": "cap", "ms": 5, "at": "budget"}], "cap takes"),
        ([{"stage": "rerank", "op": "shift", "ms": 1e12}], "ms"),
        ("rerank:remove", "list"),
        ([{"stage": "rerank", "op": "remove"}] * 21, "20"),
    ],
)
def test_bad_changes_are_a_400_naming_what_is_wrong(
    chat: Chat, eager: None, changes: Any, message: str
) -> None:
    response = ask(chat, chat.world.owner, changes)

    assert response.status_code == 400
    assert message in str(error_of(response)["fields"])
    assert not WhatIfRun.objects.exists()


def test_a_cap_at_the_budget_needs_a_budget(chat: Chat, eager: None) -> None:
    Stage.objects.filter(pipeline=chat.pipeline, slug="tool").update(budget_ms=None)

    response = ask(chat, chat.world.owner, [{"stage": "tool", "op": "cap", "at": "budget"}])

    assert response.status_code == 400
    assert "no budget" in str(error_of(response)["fields"])


@pytest.mark.parametrize(
    "extra", [{"traces": 5}, {"traces": 10**6}, {"percentile": "p42"}, {"window": "3y"}]
)
def test_bad_parameters_are_a_400(chat: Chat, eager: None, extra: dict[str, Any]) -> None:
    assert ask(chat, chat.world.owner, [], **extra).status_code == 400


def test_an_oversized_body_is_a_413(chat: Chat) -> None:
    body = '{"changes": [' + ",".join(['{"stage": "rerank", "op": "remove"}'] * 200_000) + "]}"
    response = token_client(chat.world.owner).generic(
        "POST", URL + "?team=acme", body, content_type="application/json"
    )
    assert response.status_code == 413


def test_without_a_worker_the_answer_is_a_run_to_poll(chat: Chat) -> None:
    client = token_client(chat.world.owner)
    response = client.post(
        URL + "?team=acme", {**chat.window, "changes": FIVE_CHANGES}, format="json"
    )

    assert response.status_code == 202
    body = response.json()
    assert body["status"] == "pending"
    assert response["Retry-After"] == "2"
    whatif_run_compute(run_id=body["run"])  # the worker's part
    polled = client.get(body["poll"])
    assert polled.status_code == 200
    assert polled.json()["traces"] == 300
    # The poll address is acme's: another team's member cannot read it.
    assert token_client(chat.world.outsider).get(body["poll"]).status_code == 404
    levers_url = body["poll"].replace("/whatif/", "/levers/")
    assert client.get(levers_url).status_code == 404  # a replay is no lever search


def test_a_team_with_its_runs_in_flight_gets_429_while_another_team_is_served(chat: Chat) -> None:
    owner = token_client(chat.world.owner)
    for factor in (0.5, 0.6):
        change = [{"stage": "rerank", "op": "scale", "factor": factor}]
        assert (
            owner.post(
                URL + "?team=acme", {**chat.window, "changes": change}, format="json"
            ).status_code
            == 202
        )

    refused = owner.post(URL + "?team=acme", {**chat.window, "changes": []}, format="json")
    served = token_client(chat.world.outsider).post(
        URL, {**chat.window, "changes": []}, format="json"
    )

    assert refused.status_code == 429
    assert refused["Retry-After"] == "5"
    assert served.status_code == 202
    # Asking again for a run already in flight is no new run: it is answered.
    change = [{"stage": "rerank", "op": "scale", "factor": 0.5}]
    assert (
        owner.post(
            URL + "?team=acme", {**chat.window, "changes": change}, format="json"
        ).status_code
        == 202
    )


def test_ten_teams_of_one_account_share_its_runs_in_flight(chat: Chat) -> None:
    owner = chat.world.owner
    ask_acme = token_client(owner)
    for factor in (0.5, 0.6):
        change = [{"stage": "rerank", "op": "scale", "factor": factor}]
        body = {**chat.window, "changes": change}
        assert ask_acme.post(URL + "?team=acme", body, format="json").status_code == 202
    # Nine more teams of the same account: each its first question, each refused.
    for n in range(9):
        team = make_team(f"acme-{n}", owner=owner)
        rag_pipeline(team)
        refused = ask_acme.post(
            URL + f"?team={team.slug}", {**chat.window, "changes": []}, format="json"
        )
        assert refused.status_code == 429, refused.content
        assert "account" in error_of(refused)["message"]
    # Another account is served meanwhile.
    served = token_client(chat.world.outsider).post(
        URL, {**chat.window, "changes": []}, format="json"
    )
    assert served.status_code == 202


def test_a_run_whose_pipeline_changed_under_it_fails_with_a_422(chat: Chat) -> None:
    client = token_client(chat.world.owner)
    change = [{"stage": "rerank", "op": "remove"}]
    pending = client.post(
        URL + "?team=acme", {**chat.window, "changes": change}, format="json"
    ).json()
    Stage.objects.filter(pipeline=chat.pipeline, slug="rerank").update(slug="rerank-v2")

    assert whatif_run_compute(run_id=pending["run"]) == RunStatus.FAILED
    response = client.get(pending["poll"])
    assert response.status_code == 422
    assert "stage" in error_of(response)["message"]


def test_a_run_whose_worker_died_twice_fails_instead_of_killing_a_third(chat: Chat) -> None:
    pending = ask(chat, chat.world.owner, FIVE_CHANGES).json()
    stale = {"status": RunStatus.RUNNING, "attempts": 2}
    WhatIfRun.objects.filter(pk=pending["run"]).update(**stale, started_at="2000-01-01T00:00Z")

    assert whatif_run_compute(run_id=pending["run"]) == RunStatus.FAILED
    assert "stopped the worker" in WhatIfRun.objects.get(pk=pending["run"]).error


def test_the_levers_name_what_would_move_the_p95(chat: Chat, eager: None) -> None:
    response = token_client(chat.world.viewer).get(LEVERS, {"team": "acme", **chat.window})

    assert response.status_code == 200, response.content
    body = response.json()
    sensitivity = {row["stage"]: row for row in body["sensitivity"]}
    # Generation sits on every request's critical path. Its time is the engine's answer
    # and, after it, the call's own last few ms back over the network (a span each): 100 ms
    # off each span of the stage (docs/whatif.md) saves 100 ms and that tail, at most 8 ms.
    assert 100 - 0.5 <= sensitivity["generation"]["saving_100ms_ms"] <= 108 + 0.5
    assert sensitivity["generation"]["saving_10pct_ms"] > sensitivity["auth"]["saving_10pct_ms"]
    kinds = {(lever["kind"], lever["stage"]) for lever in body["levers"]}
    assert ("concurrent", "history") in kinds or ("concurrent", "auth") in kinds
    savings = [lever["saving_ms"] for lever in body["levers"]]
    assert savings == sorted(savings, reverse=True)
    assert RunKind.LEVERS in WhatIfRun.objects.values_list("kind", flat=True)


def test_the_levers_of_a_scenario_start_from_it_and_leave_out_the_stage_it_removed(
    chat: Chat, eager: None
) -> None:
    client = token_client(chat.world.viewer)
    as_ran = client.get(LEVERS, {"team": "acme", **chat.window}).json()
    response = client.get(LEVERS, {"team": "acme", **chat.window, "change": ["rerank:remove"]})

    assert response.status_code == 200, response.content
    body = response.json()
    assert "rerank" in {row["stage"] for row in as_ran["sensitivity"]}
    assert "rerank" not in {row["stage"] for row in body["sensitivity"]}
    for lever in body["levers"]:
        assert "rerank" not in {c["stage"] for c in lever["changes"]} | {
            c.get("with") for c in lever["changes"]
        }
    # Without rerank every request is faster: the savings start from the scenario's p95.
    assert body["base_ms"] < as_ran["base_ms"]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (["rerank:explode"], "write it as stage:op"),
        (["ghost:remove"], "one of this pipeline"),
        (["rerank:scale:nan"], "must be between"),
        (["rerank:remove"] * 21, "At most 20 changes"),
    ],
)
def test_a_levers_scenario_that_makes_no_sense_is_refused(
    chat: Chat, changes: list[str], message: str
) -> None:
    response = token_client(chat.world.owner).get(
        LEVERS, {"team": "acme", **chat.window, "change": changes}
    )
    assert response.status_code == 400
    assert message in str(response.json())
    assert not WhatIfRun.objects.exists()


def test_an_outsider_cannot_ask_for_the_levers_of_a_scenario(chat: Chat) -> None:
    response = token_client(chat.world.outsider).get(
        LEVERS, {"team": "acme", **chat.window, "change": ["rerank:remove"]}
    )
    assert response.status_code == 404


def test_scenarios_are_saved_by_writers_listed_to_members_and_hidden_from_outsiders(
    chat: Chat,
) -> None:
    owner, viewer = token_client(chat.world.owner), token_client(chat.world.viewer)
    saved = owner.post(
        SCENARIOS + "?team=acme", {"name": "faster answer", "changes": FIVE_CHANGES}, format="json"
    )
    assert saved.status_code == 201
    body = saved.json()
    assert body["created_by"] == chat.world.owner.username
    assert "change=rerank%3Aremove" in body["url"]
    # The same name replaces the scenario.
    replaced = owner.post(
        SCENARIOS + "?team=acme",
        {"name": "faster answer", "changes": FIVE_CHANGES[:1]},
        format="json",
    )
    assert replaced.json()["id"] == body["id"]
    assert [s["name"] for s in viewer.get(SCENARIOS, {"team": "acme"}).json()] == ["faster answer"]

    refused = viewer.post(
        SCENARIOS + "?team=acme", {"name": "mine", "changes": FIVE_CHANGES}, format="json"
    )
    assert refused.status_code == 403
    outsider = token_client(chat.world.outsider)
    assert outsider.get(SCENARIOS, {"team": "acme"}).status_code == 404
    assert outsider.get(SCENARIOS).json() == []  # their own pipeline of the same slug
    detail = f"{SCENARIOS}/{body['id']}"
    assert outsider.delete(detail).status_code == 404
    assert viewer.delete(detail + "?team=acme").status_code == 403
    assert token_client(chat.world.editor).delete(detail + "?team=acme").status_code == 204
    assert not SavedScenario.objects.exists()


@pytest.mark.parametrize(
    "body",
    [
        {"name": "", "changes": FIVE_CHANGES},
        {"name": "x", "changes": []},
        {"name": "x", "changes": [{"stage": "nope", "op": "remove"}]},
        {"name": "x" * 101, "changes": FIVE_CHANGES},
    ],
)
def test_a_scenario_must_have_a_name_and_valid_changes(chat: Chat, body: dict[str, Any]) -> None:
    response = token_client(chat.world.owner).post(SCENARIOS + "?team=acme", body, format="json")
    assert response.status_code == 400


def test_reading_a_finished_run_takes_a_few_queries(chat: Chat, eager: None) -> None:
    first = ask(chat, chat.world.owner, FIVE_CHANGES).json()
    client = token_client(chat.world.owner)
    url = f"{URL}/{first['run']}?team=acme"
    client.get(url)  # the token's first use writes its last-used time
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url).status_code == 200
    assert len(queries) <= 8
