"""The trace list: who sees it, what it lists, its filters and its keyset pages."""

import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from apps.ingest.models import Trace
from apps.ingest.selectors import TraceCursor
from apps.teams.current_team import CURRENT_TEAM_SESSION_KEY
from tests.builders.ingested_traces import Explorer, hex_of, ingest, now_ns, single_span
from tests.conftest import client_for

MEMBERS = ["owner", "editor", "viewer"]


def list_url(team_slug: str = "acme") -> str:
    return reverse("traces:list", kwargs={"team_slug": team_slug})


def listed(response: Any) -> list[str]:
    """Trace ids of the rows, in page order."""
    return re.findall(r'data-trace="([0-9a-f]{32})"', response.content.decode())


def ids(*traces: Trace) -> list[str]:
    return [bytes(trace.trace_id).hex() for trace in traces]


@pytest.mark.parametrize("role", MEMBERS)
def test_every_member_sees_the_teams_finalized_traces_newest_first(
    explorer: Explorer, role: str
) -> None:
    client = client_for(getattr(explorer.world, role))
    response = client.get(list_url())
    assert response.status_code == 200
    assert listed(response) == ids(*explorer.newest_first())
    assert hex_of(0xB1) not in response.content.decode()  # globex's trace
    assert client.session[CURRENT_TEAM_SESSION_KEY] == "acme"


def test_a_row_shows_start_root_service_pipeline_duration_spans_and_badges(
    explorer: Explorer,
) -> None:
    html = client_for(explorer.world.owner).get(list_url()).content.decode()
    row = re.search(rf'<tr data-trace="{hex_of(0xA2)}">(.*?)</tr>', html, re.S)
    assert row is not None
    cells = row.group(1)
    assert explorer.errored.start_ns is not None
    assert reverse("traces:detail", args=["acme", hex_of(0xA2)]) in cells
    assert "POST /chat" in cells
    assert "chat-api" in cells
    assert "RAG chat" in cells
    assert "1 s" in cells
    assert ">5<" in cells
    assert 'class="badge over">error' in cells
    orphans = re.search(rf'<tr data-trace="{hex_of(0xA6)}">(.*?)</tr>', html, re.S)
    assert orphans is not None
    assert "incomplete" in orphans.group(1)


def test_outsider_gets_404(explorer: Explorer) -> None:
    assert client_for(explorer.world.outsider).get(list_url()).status_code == 404


def test_anonymous_is_sent_to_log_in(explorer: Explorer) -> None:
    response = Client().get(list_url())
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_posting_is_not_allowed(explorer: Explorer) -> None:
    assert client_for(explorer.world.owner).post(list_url()).status_code == 405


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"pipeline": "rag-chat"}, ["ok", "errored"]),
        ({"pipeline": "unmatched"}, ["health", "health_old", "batch", "orphans", "stale"]),
        ({"status": "error"}, ["errored", "batch"]),
        ({"status": "incomplete"}, ["orphans"]),
        ({"status": "ok"}, ["health", "ok", "health_old", "stale"]),
        ({"min_duration_ms": "500"}, ["ok", "errored", "batch", "orphans"]),
        ({"min_duration_ms": "501"}, ["ok", "errored", "orphans"]),
        ({"pipeline": "unmatched", "status": "error", "min_duration_ms": "100"}, ["batch"]),
    ],
)
def test_filters_narrow_the_list(
    explorer: Explorer, query: dict[str, str], expected: list[str]
) -> None:
    response = client_for(explorer.world.viewer).get(list_url(), query)
    assert response.status_code == 200
    assert listed(response) == ids(*(getattr(explorer, name) for name in expected))


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"pipeline": "no-such"}, "This team has no pipeline “no-such”"),
        ({"status": "slow"}, "Use one of error, incomplete, ok"),
        ({"min_duration_ms": "-1"}, "Enter a whole number from 0 to 86400000"),
        ({"min_duration_ms": "abc"}, "Enter a whole number."),
        ({"min_duration_ms": "9" * 30}, "Enter a whole number from 0 to 86400000"),
        ({"cursor": "not-a-cursor"}, "damaged"),
        ({"cursor": "x" * 500}, "damaged"),
    ],
)
def test_malformed_filters_come_back_as_errors_with_no_rows(
    explorer: Explorer, query: dict[str, str], message: str
) -> None:
    response = client_for(explorer.world.owner).get(list_url(), query)
    assert response.status_code == 200
    assert message in response.content.decode()
    assert listed(response) == []


def test_another_teams_pipeline_is_not_a_filter_choice(explorer: Explorer) -> None:
    from tests.builders.configuration import make_pipeline

    make_pipeline(explorer.world.other_team, "globex-only")
    response = client_for(explorer.world.owner).get(list_url(), {"pipeline": "globex-only"})
    assert "This team has no pipeline “globex-only”" in response.content.decode()
    assert listed(response) == []


def test_pages_follow_the_keyset_until_every_trace_was_listed_once(
    explorer: Explorer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("apps.dashboards.views.traces.PAGE_SIZE", 3)
    client = client_for(explorer.world.owner)
    seen: list[str] = []
    url = list_url() + "?pipeline=&status="
    pages = 0
    while url:
        response = client.get(url)
        assert response.status_code == 200
        rows = listed(response)
        assert 0 < len(rows) <= 3
        seen += rows
        pages += 1
        match = re.search(r'rel="next" href="([^"]+)"', response.content.decode())
        url = match.group(1).replace("&amp;", "&") if match else ""
    assert pages == 3
    assert seen == ids(*explorer.newest_first())


def test_traces_starting_at_the_same_instant_are_paged_by_id(
    world: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("apps.dashboards.views.traces.PAGE_SIZE", 2)
    t0 = now_ns()
    ingest(world.team, *(single_span(0xC0 + i, t0, name="tie") for i in range(5)))
    tied = list(Trace.objects.filter(root_name="tie").order_by("-id"))
    client = client_for(world.owner)
    seen: list[str] = []
    cursors: list[str] = []
    for _ in range(3):
        response = client.get(list_url(), {"cursor": cursors[-1] if cursors else ""})
        seen += listed(response)
        match = re.search(r"cursor=([A-Za-z0-9_-]+)", response.content.decode())
        cursors.append(match.group(1) if match else "")
    assert seen == ids(*tied)
    assert cursors == [
        TraceCursor(t0, tied[1].pk).encode(),
        TraceCursor(t0, tied[3].pk).encode(),
        "",
    ]


def test_htmx_gets_only_the_results_fragment(explorer: Explorer) -> None:
    response = client_for(explorer.world.owner).get(
        list_url(), {"pipeline": "rag-chat"}, HTTP_HX_REQUEST="true"
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith('<section id="trace-results"')
    assert "<html" not in html
    assert listed(response) == ids(explorer.ok, explorer.errored)
    assert "HX-Request" in response["Vary"]


def test_going_back_to_a_pushed_url_htmx_no_longer_holds_gets_the_whole_page(
    explorer: Explorer,
) -> None:
    response = client_for(explorer.world.owner).get(
        list_url(),
        {"pipeline": "rag-chat"},
        HTTP_HX_REQUEST="true",
        HTTP_HX_HISTORY_RESTORE_REQUEST="true",
    )
    html = response.content.decode()
    assert "<html" in html
    assert listed(response) == ids(explorer.ok, explorer.errored)


def test_a_team_without_traces_sees_how_to_send_them(world: Any) -> None:
    response = client_for(world.owner).get(list_url())
    assert response.status_code == 200
    assert "No analyzed traces" in response.content.decode()
    assert "/v1/traces" in response.content.decode()


def test_the_team_nav_links_to_traces(world: Any) -> None:
    html = client_for(world.viewer).get(reverse("pipelines:list", args=["acme"])).content.decode()
    assert f'href="{list_url()}"' in html
