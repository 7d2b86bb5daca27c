"""Unmatched traffic: groups of root span and service with counts, percentiles, and a way out."""

import math
import re
from html import unescape
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from apps.analysis.pipeline_routing import compile_pipeline
from apps.analysis.spans import Span
from apps.ingest.models import Trace
from apps.ingest.selectors import root_span_glob, unmatched_traffic
from tests.builders.ingested_traces import Explorer
from tests.conftest import client_for

MEMBERS = ["owner", "editor", "viewer"]


def percentile_cont(values: list[int], fraction: float) -> float:
    """Linear interpolation between closest ranks, as PostgreSQL's percentile_cont."""
    if not values:
        return 0.0
    ordered = sorted(values)
    position = fraction * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


URL = "/teams/acme/traces/unmatched/"


def groups(response: Any) -> dict[tuple[str, str], int]:
    html = unescape(response.content.decode())
    rows = re.findall(
        r'<tr data-root="([^"]*)" data-service="([^"]*)">.*?data-role="count">(\d+)<', html, re.S
    )
    return {(root, service): int(count) for root, service, count in rows}


@pytest.mark.parametrize("role", MEMBERS)
def test_every_member_sees_the_last_24_hours_of_unmatched_traffic(
    explorer: Explorer, role: str
) -> None:
    response = client_for(getattr(explorer.world, role)).get(URL)
    assert response.status_code == 200
    # Not the 30-hour-old health check, not the incomplete trace, not globex's traffic.
    assert groups(response) == {("GET /health", "chat-api"): 2, ("POST /batch", "batch-worker"): 1}
    assert re.search(r'data-role="total">3<', response.content.decode())


def test_outsider_gets_404(explorer: Explorer) -> None:
    assert client_for(explorer.world.outsider).get(URL).status_code == 404


def test_anonymous_is_sent_to_log_in(explorer: Explorer) -> None:
    response = Client().get(URL)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_the_summary_has_counts_percentiles_errors_and_last_seen(explorer: Explorer) -> None:
    summary = unmatched_traffic(team=explorer.world.team)
    assert summary.total == 3
    health, batch = summary.groups
    assert (health.root_name, health.service, health.count, health.error_count) == (
        "GET /health", "chat-api", 2, 0,
    )  # fmt: skip
    assert (health.p50_ms, health.p95_ms) == (20.0, 29.0)  # 10 and 30 ms, interpolated
    assert health.last_seen_ns == explorer.health.start_ns
    assert (batch.count, batch.error_count, batch.p50_ms, batch.p95_ms) == (1, 1, 500.0, 500.0)


def test_a_shorter_window_counts_less(explorer: Explorer) -> None:
    response = client_for(explorer.world.owner).get(URL, {"window": "1h"})
    assert groups(response) == {("GET /health", "chat-api"): 1}
    response = client_for(explorer.world.owner).get(URL, {"window": "7d"})
    assert groups(response)[("GET /health", "chat-api")] == 3


def test_an_unknown_window_falls_back_to_24_hours(explorer: Explorer) -> None:
    response = client_for(explorer.world.owner).get(URL, {"window": "forever"})
    assert response.status_code == 200
    assert groups(response)[("GET /health", "chat-api")] == 2


def test_a_new_pipeline_takes_the_traffic_out_of_the_summary(explorer: Explorer) -> None:
    from tests.builders.configuration import make_pipeline
    from tests.builders.ingested_traces import ingest, now_ns, single_span

    make_pipeline(explorer.world.team, "health", match_root_span="GET /health")
    ingest(explorer.world.team, single_span(0xD1, now_ns(), name="GET /health"))
    # Traces finalized before the pipeline existed stay unmatched; the new one is matched.
    assert groups(client_for(explorer.world.owner).get(URL))[("GET /health", "chat-api")] == 2


def test_editors_get_a_create_link_that_prefills_the_pipeline_form(explorer: Explorer) -> None:
    client = client_for(explorer.world.editor)
    html = client.get(URL).content.decode()
    links = [unescape(href) for href in re.findall(r'href="([^"]*/pipelines/new/\?[^"]*)"', html)]
    assert len(links) == 2
    query = parse_qs(urlsplit(links[0]).query)
    assert query == {"service": ["chat-api"], "root_span": ["GET /health"]}
    form = client.get(links[0]).content.decode()
    assert 'name="match_service" value="chat-api"' in form
    assert 'name="match_root_span" value="GET /health"' in form


def test_viewers_get_no_create_link(explorer: Explorer) -> None:
    html = client_for(explorer.world.viewer).get(URL).content.decode()
    assert "/pipelines/new/" not in html
    assert "Create pipeline" not in html


def test_the_pipelines_page_loads_a_short_summary(explorer: Explorer) -> None:
    client = client_for(explorer.world.owner)
    html = client.get(reverse("pipelines:list", args=["acme"])).content.decode()
    assert f'hx-get="{URL}?compact=1"' in html
    assert f'href="{URL}"' in html
    response = client.get(URL, {"compact": "1"}, HTTP_HX_REQUEST="true")
    fragment = response.content.decode()
    assert fragment.lstrip().startswith('<section id="unmatched-summary"')
    assert "<html" not in fragment
    assert "All unmatched traffic" in fragment
    assert groups(response) == {("GET /health", "chat-api"): 2, ("POST /batch", "batch-worker"): 1}


def test_the_short_summary_lists_at_most_five_groups(world: Any) -> None:
    from tests.builders.ingested_traces import ingest, now_ns, single_span

    ingest(world.team, *(single_span(0xE0 + i, now_ns(), name=f"GET /r{i}") for i in range(7)))
    response = client_for(world.owner).get(URL, {"compact": "1"}, HTTP_HX_REQUEST="true")
    assert len(groups(response)) == 5
    assert len(groups(client_for(world.owner).get(URL))) == 7


def test_no_unmatched_traffic_says_so(world: Any) -> None:
    response = client_for(world.owner).get(URL)
    assert "went unmatched" in response.content.decode()


@pytest.mark.parametrize(
    ("values", "fraction", "expected"),
    [([], 0.5, 0.0), ([7], 0.95, 7.0), ([10, 30], 0.5, 20.0), ([10, 30], 0.95, 29.0),
     ([4, 1, 3, 2], 0.5, 2.5), (list(range(1, 101)), 0.95, 95.05)],
)  # fmt: skip
def test_the_reference_percentile_interpolates_like_postgres(
    values: list[int], fraction: float, expected: float
) -> None:
    assert percentile_cont(values, fraction) == pytest.approx(expected)


@pytest.mark.parametrize(
    "name", ["GET /health", "GET /items/[id]", "what?*", "x" * 600, "[" * 300, "a*" * 150]
)
def test_the_suggested_glob_matches_the_root_span_name_and_fits_the_field(
    world: Any, name: str
) -> None:
    from tests.builders.configuration import make_pipeline

    glob = root_span_glob(name)
    assert len(glob) <= 200
    pipeline = make_pipeline(world.team, "p", match_root_span=glob)
    root = Span("a", None, name, "svc", "server", 0, 1)
    assert compile_pipeline(pipeline).matches(root)
    if len(name) <= 60:
        other = Span("b", None, name + "x", "svc", "server", 0, 1)
        assert not compile_pipeline(pipeline).matches(other)


def test_the_group_percentiles_are_exact_over_the_stored_traces(explorer: Explorer) -> None:
    summary = unmatched_traffic(team=explorer.world.team)
    for group in summary.groups:
        durations = [
            end - start
            for start, end in Trace.objects.filter(
                team=explorer.world.team,
                pipeline__isnull=True,
                root_name=group.root_name,
                root_service=group.service,
                start_ns__gte=summary.since.timestamp() * 1e9,
                end_ns__isnull=False,
                incomplete=False,
            ).values_list("start_ns", "end_ns")
            if start is not None and end is not None
        ]
        assert group.count == len(durations)
        assert group.p50_ns == pytest.approx(percentile_cont(durations, 0.5))
        assert group.p95_ns == pytest.approx(percentile_cont(durations, 0.95))


@pytest.mark.parametrize(("query", "selected"), [({}, "24h"), ({"window": "6h"}, "6h"),
                                                  ({"window": "bogus"}, "24h")])  # fmt: skip
def test_the_window_select_shows_the_window_in_use(
    world: Any, query: dict[str, str], selected: str
) -> None:
    html = client_for(world.owner).get(URL, query).content.decode()
    assert re.findall(r'<option value="([^"]+)" selected>', html) == [selected]


def test_an_oversized_prefill_is_cut_to_the_field_length(world: Any) -> None:
    url = reverse("pipelines:create", args=["acme"])
    html = client_for(world.editor).get(url, {"service": "s" * 500}).content.decode()
    assert f'name="match_service" value="{"s" * 200}"' in html
    assert "s" * 201 not in html


def test_the_summary_is_computed_once_in_its_half_minute_and_per_team(
    explorer: Explorer, clean_cache: None
) -> None:
    client = client_for(explorer.world.viewer)
    first = groups(client.get(URL))
    queries_first = CaptureQueriesContext(connection)
    with queries_first:
        assert groups(client.get(URL)) == first
    # The page's session and membership reads only: the traces are not grouped again.
    assert not any("percentile_cont" in q["sql"] for q in queries_first.captured_queries)
    # Another team's summary is its own.
    assert groups(client_for(explorer.world.outsider).get("/teams/globex/traces/unmatched/")) == {
        ("GET /globex", "chat-api"): 1
    }
