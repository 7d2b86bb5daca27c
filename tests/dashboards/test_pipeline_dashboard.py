"""The pipeline dashboard: the API's figures for the same window, tenancy, bounded queries."""

import copy
import re
from collections.abc import Iterator
from html import unescape
from typing import Any

import numpy as np
import pytest
from django.test import Client
from pytest_django import DjangoDbBlocker

from apps.core.figures import format_ms, format_percent
from apps.rollups.models import Violation
from tests.builders.api import ApiWorld, api_world, session_client
from tests.builders.bucket_rows import store_rollups
from tests.builders.ingested_traces import retrieval_generation_traces
from tests.conftest import client_for, team_world
from tests.shared_rows import shared_rows

FROM, TO = "2025-01-15T09:58:50", "2025-01-15T11:01:20"
# The module's world (``traffic``) is one of its own: its names end in "-dash".
SUFFIX = "-dash"
TEAM = f"acme{SUFFIX}"
URL = f"/teams/{TEAM}/dashboards/rag-chat/"
QUERY = {"window": "custom", "from": FROM, "to": TO, "percentile": "p95"}
MEMBERS = ["owner", "editor", "viewer"]


def _epoch(text: str) -> int:
    from datetime import UTC, datetime

    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp())


def _traffic() -> ApiWorld:
    api = api_world(team_world(SUFFIX))
    rng = np.random.default_rng(7)
    starts = sorted(int(s) for s in rng.integers(_epoch(FROM) - 600, _epoch(TO) + 600, 500))
    traces = retrieval_generation_traces(
        api, starts, rng, retrieval_ms=300, retrieval_sigma=0.6, overhead_ms=7, error_every=50
    )
    store_rollups(api.pipeline, traces)
    return api


@pytest.fixture(scope="module")
def _traffic_rows(django_db_setup: None, django_db_blocker: DjangoDbBlocker) -> Iterator[ApiWorld]:
    # Written once for the module's tests; what one adds (a violation) is undone after it.
    yield from shared_rows(django_db_blocker, _traffic)


@pytest.fixture
def traffic(db: None, clean_cache: None, _traffic_rows: ApiWorld) -> ApiWorld:
    # The ids are the same in every test: nothing one test left in the cache may answer
    # the next.
    return copy.deepcopy(_traffic_rows)


def cell(html: str, stage: str, role: str) -> str:
    row = re.search(rf'<tr data-stage="{stage}"[^>]*>(.*?)</tr>', html, re.S)
    assert row, stage
    found = re.search(rf'data-role="{role}">(.*?)</td>', row.group(1), re.S)
    assert found, (stage, role)
    return re.sub(r"<[^>]+>", " ", unescape(found.group(1))).split()[0 if role != "used" else -2]


def test_the_stage_table_shows_the_apis_figures_for_the_same_window(traffic: ApiWorld) -> None:
    owner = traffic.world.owner
    api_body = (
        session_client(owner)
        .get(
            "/api/v1/pipelines/rag-chat/percentiles",
            {"team": TEAM, "from": FROM + "Z", "to": TO + "Z"},
        )
        .json()
    )
    html = client_for(owner).get(URL, QUERY).content.decode()
    for stage in api_body["stages"]:
        slug = stage["slug"]
        assert cell(html, slug, "count") == str(stage["count"])
        for p in ("p50", "p90", "p95", "p99"):
            shown = re.sub(r"<[^>]+>", "", cell(html, slug, p))
            assert f"{shown} ms".startswith(format_ms(stage[p]).split()[0]), (slug, p)
        share = stage["critical_path"]["share"]
        assert cell(html, slug, "share") == format_percent(share, 1).split()[0]
    e2e = api_body["e2e"]
    kpi = re.search(r'data-role="e2e">.*?kpi-value">([^<]+)<', html, re.S)
    assert kpi
    assert kpi.group(1) == format_ms(e2e["p95"])
    traces = re.search(r'data-role="traffic">.*?kpi-value">([^<]+)<', html, re.S)
    assert traces
    assert traces.group(1) == str(e2e["count"])


@pytest.mark.parametrize("role", MEMBERS)
def test_every_member_sees_the_dashboard_and_its_fragment(traffic: ApiWorld, role: str) -> None:
    client = client_for(getattr(traffic.world, role))
    page = client.get(URL, QUERY)
    assert page.status_code == 200
    assert "<html" in page.content.decode()
    fragment = client.get(URL, QUERY, HTTP_HX_REQUEST="true")
    assert fragment.status_code == 200
    body = fragment.content.decode()
    assert body.lstrip().startswith('<section id="figures"')
    assert "<html" not in body


@pytest.mark.parametrize(
    "url",
    [URL, URL + "fit/", URL + "stages/retrieval/", f"/teams/{TEAM}/dashboards/",
     f"/teams/{TEAM}/violations/"],
)  # fmt: skip
def test_an_outsider_gets_404_on_every_page_and_fragment(traffic: ApiWorld, url: str) -> None:
    client = client_for(traffic.world.outsider)
    assert client.get(url).status_code == 404
    assert client.get(url, HTTP_HX_REQUEST="true").status_code == 404


def test_another_teams_pipeline_of_the_same_slug_is_not_shown(traffic: ApiWorld) -> None:
    # globex has a rag-chat too; acme's page never shows globex's figures, and globex's
    # members never reach acme's.
    html = client_for(traffic.world.owner).get(URL, QUERY).content.decode()
    assert "Globex chat" not in html
    assert client_for(traffic.world.outsider).get(URL).status_code == 404


def test_anonymous_is_sent_to_sign_in(traffic: ApiWorld) -> None:
    response = Client().get(URL)
    assert response.status_code == 302
    assert "/accounts/login/" in response["Location"]


def test_a_view_is_its_url(traffic: ApiWorld) -> None:
    client = client_for(traffic.world.owner)
    html = client.get(URL, {**QUERY, "percentile": "p99", "sort": "p99", "dir": "desc"}).content
    text = html.decode()
    assert 'aria-current="true">p99<' in text
    rows = re.findall(r'<tr data-stage="([^"]+)"', text)
    assert rows[:2] == ["generation", "retrieval"]  # generation's p99 is the larger
    # Every other link and the refresh keep the sort.
    p50 = re.search(r'<a href="([^"]+)"[^>]*>p50</a>', text)
    assert p50
    assert "sort=p99" in p50.group(1)
    assert "dir=desc" in p50.group(1)


def test_bad_parameters_fall_back_to_the_defaults_with_a_message(traffic: ApiWorld) -> None:
    client = client_for(traffic.world.owner)
    response = client.get(URL, {"window": "custom", "from": "not a time", "percentile": "p42"})
    assert response.status_code == 200
    text = response.content.decode()
    assert "Enter a valid date/time." in text
    assert 'aria-current="true">1 hour<' in text


def test_the_figures_refresh_while_the_range_ends_now_and_not_when_paused(
    traffic: ApiWorld,
) -> None:
    client = client_for(traffic.world.owner)
    live = client.get(URL, {"window": "1h"}, HTTP_HX_REQUEST="true").content.decode()
    assert 'hx-trigger="every 15s"' in live
    paused = client.get(URL, {"window": "1h", "live": "0"}, HTTP_HX_REQUEST="true")
    assert 'hx-trigger="every 15s"' not in paused.content.decode()
    custom = client.get(URL, QUERY, HTTP_HX_REQUEST="true").content.decode()
    assert 'hx-trigger="every 15s"' not in custom  # a range in the past does not change


def test_the_page_runs_a_bounded_number_of_queries(
    traffic: ApiWorld, django_assert_max_num_queries: Any
) -> None:
    client = client_for(traffic.world.owner)
    # The degradation ledger adds one (its tally; its chart only when it has decisions),
    # the holdout one (its requests; the rollups' good count only when there are some).
    with django_assert_max_num_queries(22):
        client.get(URL, QUERY)
    with django_assert_max_num_queries(18):
        client.get(URL, QUERY, HTTP_HX_REQUEST="true")


def test_open_violations_are_counted_and_listed(traffic: ApiWorld) -> None:
    from django.utils import timezone

    now = timezone.now()
    Violation.objects.create(
        team=traffic.world.team, pipeline=traffic.pipeline, stage=traffic.retrieval,
        percentile="p95", budget_ms=400, window_s=300, observed_ms=650, peak_ms=900,
        sample_count=80, opened_at=now, last_evaluated_at=now,
    )  # fmt: skip
    html = client_for(traffic.world.viewer).get(URL, {"window": "1h"}).content.decode()
    count = re.search(r'data-role="violations">.*?kpi-value">(\d+)<', html, re.S)
    assert count
    assert count.group(1) == "1"
    assert "Retrieval p95 over 400 ms" in html or "retrieval p95 over 400 ms" in html
