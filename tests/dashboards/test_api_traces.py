"""The traces API: access for every kind of caller, filters, keyset pages, one trace, unmatched."""

from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.utils import timezone
from rest_framework.test import APIClient

from apps.ingest.models import Trace, TraceState
from apps.teams.services import ingest_token_create
from tests.builders.api import error_of, session_client, token_client
from tests.builders.ingested_traces import Explorer, build_explorer, hex_of
from tests.builders.spans import AUTH, LLM, RETR_B, ROOT
from tests.builders.stored_spans import trace_without_spans
from tests.conftest import TeamWorld
from tests.timing import MS

LIST = "/api/v1/traces/"
UNMATCHED = "/api/v1/traces/unmatched/"
MEMBERS = ["owner", "editor", "viewer"]


@pytest.fixture
def explorer(world: TeamWorld) -> Explorer:
    return build_explorer(world)


def detail(trace: Trace | str) -> str:
    return f"/api/v1/traces/{trace if isinstance(trace, str) else bytes(trace.trace_id).hex()}/"


def ids(*traces: Trace) -> list[str]:
    return [bytes(trace.trace_id).hex() for trace in traces]


def endpoints(explorer: Explorer) -> list[str]:
    return [LIST, detail(explorer.ok), UNMATCHED]


@pytest.mark.parametrize("role", MEMBERS)
def test_every_member_reads_every_endpoint_with_a_token(explorer: Explorer, role: str) -> None:
    client = token_client(getattr(explorer.world, role))
    for url in endpoints(explorer):
        assert client.get(url).status_code == 200, url


def test_a_browser_session_works_too(explorer: Explorer) -> None:
    client = session_client(explorer.world.viewer)
    for url in endpoints(explorer):
        assert client.get(url).status_code == 200, url


def test_outsider_gets_404_naming_the_team(explorer: Explorer) -> None:
    client = token_client(explorer.world.outsider)
    for url in endpoints(explorer):
        response = client.get(url, {"team": "acme"})
        assert response.status_code == 404, url
        assert error_of(response)["code"] == "not_found"


def test_outsider_without_a_team_sees_only_their_own_traces(explorer: Explorer) -> None:
    client = token_client(explorer.world.outsider)
    assert [t["trace_id"] for t in client.get(LIST).json()["results"]] == ids(explorer.theirs)
    assert client.get(detail(explorer.ok)).status_code == 404
    assert client.get(detail(explorer.theirs)).status_code == 200


def test_anonymous_gets_401(explorer: Explorer) -> None:
    for url in endpoints(explorer):
        response = APIClient().get(url)
        assert response.status_code == 401, url
        assert error_of(response)["code"] == "not_authenticated"


def test_an_ingest_token_gets_401(explorer: Explorer) -> None:
    _, raw = ingest_token_create(team=explorer.world.team, name="otel", created_by=None)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    for url in endpoints(explorer):
        response = client.get(url)
        assert response.status_code == 401, url
        assert "Ingest tokens can only send spans" in error_of(response)["message"]


def test_writes_are_not_allowed(explorer: Explorer) -> None:
    client = token_client(explorer.world.owner)
    for url in endpoints(explorer):
        assert client.post(url, {}, format="json").status_code == 405, url
        assert client.delete(url).status_code == 405, url
    assert Trace.objects.count() == 8


def test_the_list_is_newest_first_with_summaries(explorer: Explorer) -> None:
    body = token_client(explorer.world.owner).get(LIST).json()
    assert body["next"] is None
    assert [t["trace_id"] for t in body["results"]] == ids(*explorer.newest_first())
    errored = body["results"][2]
    assert errored == {
        "trace_id": hex_of(0xA2),
        "start_time": errored["start_time"],
        "start_unix_nano": str(explorer.errored.start_ns),
        "root_name": "POST /chat",
        "service": "chat-api",
        "pipeline": "rag-chat",
        "duration_ms": 1000.0,
        "span_count": 5,
        "error": True,
        "incomplete": False,
    }
    assert body["results"][0]["pipeline"] is None


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"pipeline": "rag-chat"}, ["ok", "errored"]),
        ({"pipeline": "unmatched"}, ["health", "health_old", "batch", "orphans", "stale"]),
        ({"status": "error"}, ["errored", "batch"]),
        ({"status": "incomplete"}, ["orphans"]),
        ({"status": "ok", "min_duration_ms": 20}, ["ok", "health_old", "stale"]),
        ({"min_duration_ms": 501}, ["ok", "errored", "orphans"]),
    ],
)
def test_filters_narrow_the_list(
    explorer: Explorer, query: dict[str, Any], expected: list[str]
) -> None:
    response = token_client(explorer.world.viewer).get(LIST, query)
    assert response.status_code == 200
    results = [t["trace_id"] for t in response.json()["results"]]
    assert results == ids(*(getattr(explorer, name) for name in expected))


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"pipeline": "no-such"}, "pipeline"),
        ({"status": "slow"}, "status"),
        ({"min_duration_ms": -1}, "min_duration_ms"),
        ({"min_duration_ms": "abc"}, "min_duration_ms"),
        ({"min_duration_ms": "9" * 40}, "min_duration_ms"),
        ({"cursor": "bm9wZQ"}, "cursor"),
        ({"cursor": "!" * 10}, "cursor"),
        ({"cursor": "x" * 200}, "cursor"),
        ({"page_size": 0}, "page_size"),
        ({"page_size": 501}, "page_size"),
    ],
)
def test_malformed_query_parameters_are_a_400_naming_the_field(
    explorer: Explorer, query: dict[str, Any], field: str
) -> None:
    response = token_client(explorer.world.owner).get(LIST, query)
    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == "invalid"
    assert set(error["fields"]) == {field}


def test_another_teams_pipeline_is_not_a_filter(explorer: Explorer) -> None:
    from tests.builders.configuration import make_pipeline

    make_pipeline(explorer.world.other_team, "globex-only")
    response = token_client(explorer.world.owner).get(LIST, {"pipeline": "globex-only"})
    assert response.status_code == 400
    assert set(error_of(response)["fields"]) == {"pipeline"}


def test_next_links_page_through_every_trace_once(explorer: Explorer) -> None:
    client = token_client(explorer.world.owner)
    url: str | None = f"http://testserver{LIST}?page_size=3&status="
    seen: list[str] = []
    pages = 0
    while url:
        body = client.get(url).json()
        assert len(body["results"]) <= 3
        seen += [t["trace_id"] for t in body["results"]]
        url = body["next"]
        pages += 1
        assert url is None or "status=" in url  # the filters travel with the cursor
    assert pages == 3
    assert seen == ids(*explorer.newest_first())


def test_a_trace_comes_with_spans_critical_path_and_breakdown(explorer: Explorer) -> None:
    body = token_client(explorer.world.viewer).get(detail(explorer.ok)).json()
    assert body["trace_id"] == hex_of(0xA1)
    assert (body["state"], body["duration_ns"], body["root_span_id"]) == (
        "finalized", 1000 * MS, f"{ROOT:016x}",
    )  # fmt: skip
    assert (body["spans_stored"], body["spans_truncated"]) == (5, False)
    spans = {int(s["span_id"], 16): s for s in body["spans"]}
    assert [int(s["span_id"], 16) for s in body["spans"]][:2] == [ROOT, AUTH]
    llm = spans[LLM]
    assert (llm["start_offset_ns"], llm["end_offset_ns"], llm["depth"]) == (300 * MS, 950 * MS, 1)
    assert llm["parts"] == [
        {"start_offset_ns": 300 * MS, "end_offset_ns": 500 * MS, "stage": "ttft"},
        {"start_offset_ns": 500 * MS, "end_offset_ns": 950 * MS, "stage": "generation"},
    ]
    # A span's attributes and events come one span at a time (test_trace_spans.py).
    assert "attributes" not in llm
    assert "events" not in llm
    assert [
        (int(s["span_id"], 16), s["stage"], s["duration_ns"]) for s in body["critical_path"]
    ] == [
        (AUTH, "auth", 50 * MS),
        (RETR_B, "retrieval", 250 * MS),
        (LLM, "ttft", 200 * MS),
        (LLM, "generation", 450 * MS),
        (ROOT, None, 50 * MS),
    ]
    breakdown = body["breakdown"]
    stages = {s["slug"]: s for s in breakdown["stages"]}
    assert {slug: (s["wall_ns"], s["critical_ns"], s["over"]) for slug, s in stages.items()} == {
        "auth": (50 * MS, 50 * MS, False),
        "retrieval": (250 * MS, 250 * MS, True),
        "ttft": (200 * MS, 200 * MS, False),
        "generation": (450 * MS, 450 * MS, None),
    }
    assert stages["retrieval"]["share"] == 0.25
    assert breakdown["untracked_critical_ns"] == 50 * MS
    total = sum(s["critical_ns"] for s in breakdown["stages"]) + breakdown["untracked_critical_ns"]
    assert total == breakdown["critical_sum_ns"] == breakdown["e2e_ns"] == body["duration_ns"]
    assert breakdown["adds_up"] is True
    assert breakdown["source"] == "spans"


def test_a_settled_trace_reads_as_settled_until_it_has_been_idle_long_enough(
    explorer: Explorer,
) -> None:
    client = token_client(explorer.world.viewer)
    Trace.objects.filter(pk=explorer.ok.pk).update(
        state=TraceState.SETTLED, last_span_at=timezone.now()
    )
    assert client.get(detail(explorer.ok)).json()["state"] == "settled"
    assert hex_of(0xA1) in [t["trace_id"] for t in client.get(LIST).json()["results"]]
    Trace.objects.filter(pk=explorer.ok.pk).update(
        last_span_at=timezone.now() - timedelta(seconds=settings.TRACE_IDLE_SECONDS)
    )
    assert client.get(detail(explorer.ok)).json()["state"] == "finalized"


def test_a_big_trace_lists_the_first_spans_and_says_so(
    explorer: Explorer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("apps.dashboards.apis.traces.MAX_WATERFALL_SPANS", 3)
    body = token_client(explorer.world.owner).get(detail(explorer.ok)).json()
    assert (len(body["spans"]), body["spans_stored"], body["spans_truncated"]) == (3, 5, True)
    assert len(body["critical_path"]) == 5


def test_another_teams_trace_id_is_a_404(explorer: Explorer) -> None:
    response = token_client(explorer.world.owner).get(detail(explorer.theirs))
    assert response.status_code == 404
    assert error_of(response)["code"] == "not_found"


@pytest.mark.parametrize("trace_hex", ["xyz", "0" * 31, "0" * 33, "g" * 32, "0" * 32])
def test_malformed_or_unknown_hex_is_a_404_with_the_error_body(
    explorer: Explorer, trace_hex: str
) -> None:
    response = token_client(explorer.world.owner).get(detail(trace_hex))
    assert response.status_code == 404
    assert error_of(response)["code"] == "not_found"


def test_unmatched_groups_with_counts_and_a_suggested_match(explorer: Explorer) -> None:
    body = token_client(explorer.world.viewer).get(UNMATCHED).json()
    assert (body["window"], body["total"]) == ("24h", 3)
    health, batch = body["groups"]
    assert health == {
        "root_name": "GET /health",
        "service": "chat-api",
        "count": 2,
        "error_count": 0,
        "p50_ms": 20.0,
        "p95_ms": 29.0,
        "last_seen": health["last_seen"],
        "suggested_match": {"service": "chat-api", "root_span": "GET /health"},
    }
    assert (batch["root_name"], batch["count"], batch["error_count"]) == ("POST /batch", 1, 1)


def test_unmatched_window_and_limit(explorer: Explorer) -> None:
    client = token_client(explorer.world.owner)
    assert [g["count"] for g in client.get(UNMATCHED, {"window": "1h"}).json()["groups"]] == [1]
    assert client.get(UNMATCHED, {"window": "7d"}).json()["total"] == 4
    assert len(client.get(UNMATCHED, {"limit": 1}).json()["groups"]) == 1


@pytest.mark.parametrize(
    ("query", "field"),
    [({"window": "forever"}, "window"), ({"limit": 0}, "limit"), ({"limit": 101}, "limit")],
)
def test_unmatched_rejects_malformed_parameters(
    explorer: Explorer, query: dict[str, Any], field: str
) -> None:
    response = token_client(explorer.world.owner).get(UNMATCHED, query)
    assert response.status_code == 400
    assert set(error_of(response)["fields"]) == {field}


def test_once_spans_aged_out_the_breakdown_comes_from_the_stage_samples(
    explorer: Explorer,
) -> None:
    aged = trace_without_spans(explorer.ok, trace_id=0xA8)
    body = token_client(explorer.world.owner).get(detail(aged)).json()
    assert (body["spans"], body["critical_path"], body["spans_stored"]) == ([], [], 0)
    breakdown = body["breakdown"]
    assert breakdown["source"] == "stage_samples"
    assert [s["critical_ns"] for s in breakdown["stages"]] == [
        50 * MS,
        250 * MS,
        200 * MS,
        450 * MS,
    ]
    assert breakdown["untracked_critical_ns"] == 50 * MS
    assert breakdown["adds_up"] is True
