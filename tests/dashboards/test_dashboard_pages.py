"""Team home, stage page, violations, fit check and rule tester: figures, tenancy, input."""

import re
from datetime import timedelta

import numpy as np
import pytest
from django.utils import timezone

from apps.core.figures import format_ms
from apps.pipelines.models import Stage
from apps.rollups.models import Violation
from tests.builders.api import ApiWorld, session_client
from tests.builders.bucket_rows import store_rollups
from tests.builders.ingested_traces import (
    hex_of,
    ingest,
    make_rag_pipeline,
    now_ns,
    retrieval_generation_traces,
)
from tests.builders.spans import rag_spans
from tests.conftest import TeamWorld, client_for
from tests.timing import MS

HOME = "/teams/acme/dashboards/"
PIPELINE = "/teams/acme/dashboards/rag-chat/"
MEMBERS = ["owner", "editor", "viewer"]


@pytest.fixture
def recent(api: ApiWorld) -> ApiWorld:
    """Hand-made rollups over the last 50 minutes: retrieval often over its 400 ms."""
    rng = np.random.default_rng(2)
    now = int(timezone.now().timestamp())
    starts = sorted(int(s) for s in rng.integers(now - 3000, now - 30, 300))
    traces = retrieval_generation_traces(
        api, starts, rng, retrieval_ms=380, retrieval_sigma=0.5, overhead_ms=5
    )
    store_rollups(api.pipeline, traces)
    return api


@pytest.mark.parametrize("role", MEMBERS)
def test_the_team_home_lists_each_pipeline_against_its_budget(recent: ApiWorld, role: str) -> None:
    html = client_for(getattr(recent.world, role)).get(HOME).content.decode()
    row = re.search(r'<tr data-pipeline="rag-chat" data-status="(\w+)">(.*?)</tr>', html, re.S)
    assert row
    api_body = (
        session_client(recent.world.owner)
        .get("/api/v1/pipelines/rag-chat/percentiles", {"team": "acme", "window": "1h"})
        .json()
    )
    assert format_ms(api_body["e2e"]["p95"]) in row.group(2)
    assert "Globex chat" not in html
    assert row.group(1) in ("ok", "over")
    assert 'class="sparkline"' in row.group(2)
    assert "Retrieval" in row.group(2) or "retrieval" in row.group(2)


def test_an_open_violation_makes_the_pipeline_violating(recent: ApiWorld) -> None:
    now = timezone.now()
    Violation.objects.create(
        team=recent.world.team, pipeline=recent.pipeline, stage=None, percentile="p95",
        budget_ms=2500, window_s=300, observed_ms=2600, peak_ms=2900, sample_count=50,
        opened_at=now, last_evaluated_at=now,
    )  # fmt: skip
    html = client_for(recent.world.viewer).get(HOME).content.decode()
    assert '<tr data-pipeline="rag-chat" data-status="violating">' in html


def test_a_team_without_pipelines_is_shown_how_to_start(api: ApiWorld) -> None:
    from tests.builders.configuration import make_team, make_user

    lonely = make_user("lonely")
    make_team("empty", owner=lonely)
    html = client_for(lonely).get("/teams/empty/dashboards/").content.decode()
    assert "No pipelines yet" in html
    assert "Define a pipeline" in html


def test_sign_in_lands_on_the_team_home(recent: ApiWorld) -> None:
    response = client_for(recent.world.owner).get("/")
    assert response["Location"] == HOME


def test_a_page_view_writes_the_session_only_when_the_team_changes(recent: ApiWorld) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client = client_for(recent.world.owner)
    client.get(HOME)
    # An auto-refreshing dashboard asks every 15 s: none of those requests writes.
    with CaptureQueriesContext(connection) as again:
        assert client.get(HOME).status_code == 200
    assert not [q for q in again.captured_queries if q["sql"].startswith("UPDATE")]


def test_the_team_home_runs_as_many_queries_for_many_pipelines_as_for_one(
    recent: ApiWorld,
) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from tests.builders.configuration import make_pipeline, make_stage

    client = client_for(recent.world.owner)
    client.get(HOME)  # the first visit remembers the team in the session: one write more
    with CaptureQueriesContext(connection) as one:
        client.get(HOME)
    for number in range(12):
        extra = make_pipeline(recent.world.team, f"extra-{number}", budget={"p95": 900})
        make_stage(extra, "only", budget_ms=300)
    with CaptureQueriesContext(connection) as many:
        html = client.get(HOME).content.decode()
    assert html.count("<tr data-pipeline=") == 13
    assert len(many) == len(one) <= 16


def test_the_stage_page_draws_its_series_its_distribution_and_slowest_traces(
    world: TeamWorld,
) -> None:
    pipeline = make_rag_pipeline(world.team)
    t0 = now_ns() - 20 * 60 * 1_000_000_000
    ingest(world.team, *(rag_spans(0xC0 + i, t0 + i * 10_000 * MS) for i in range(6)))
    from apps.rollups.services.bucket_pass import rollups_process_dirty

    while rollups_process_dirty().buckets:
        pass
    url = f"/teams/acme/dashboards/{pipeline.slug}/stages/retrieval/"
    html = client_for(world.viewer).get(url, {"window": "1h"}).content.decode()
    assert html.count('class="chart line-chart"') == 2
    assert '<rect class="bar' in html
    slow = re.findall(r'<tr data-trace="([0-9a-f]{32})">', html)
    assert len(slow) == 6
    assert set(slow) == {hex_of(0xC0 + i) for i in range(6)}
    assert client_for(world.outsider).get(url).status_code == 404
    missing = f"/teams/acme/dashboards/{pipeline.slug}/stages/nope/"
    assert client_for(world.owner).get(missing).status_code == 404


def test_violations_list_and_detail_with_examples_and_tenancy(recent: ApiWorld) -> None:
    now = timezone.now()
    violation = Violation.objects.create(
        team=recent.world.team, pipeline=recent.pipeline, stage=recent.retrieval,
        percentile="p95", budget_ms=400, window_s=300, observed_ms=650, peak_ms=900,
        sample_count=80, opened_at=now - timedelta(minutes=20), last_evaluated_at=now,
        example_trace_ids=["ab" * 16],
    )  # fmt: skip
    theirs = Violation.objects.create(
        team=recent.world.other_team, pipeline=recent.other_pipeline, stage=None,
        percentile="p95", budget_ms=100, window_s=300, observed_ms=650, peak_ms=900,
        sample_count=80, opened_at=now, last_evaluated_at=now,
    )  # fmt: skip
    client = client_for(recent.world.viewer)
    listing = client.get("/teams/acme/violations/", {"state": "open"}).content.decode()
    assert f'data-violation="{violation.pk}"' in listing
    assert f'data-violation="{theirs.pk}"' not in listing
    detail = client.get(f"/teams/acme/violations/{violation.pk}/").content.decode()
    assert "ab" * 16 in detail
    assert '<tr data-stage="retrieval" class="highlighted">' in detail
    assert client.get(f"/teams/acme/violations/{theirs.pk}/").status_code == 404
    bad = client.get("/teams/acme/violations/", {"state": "<script>", "pipeline": "x" * 500})
    assert bad.status_code == 200


def test_the_fit_check_suggests_and_only_editors_apply(recent: ApiWorld) -> None:
    url = PIPELINE + "fit/"
    viewer = client_for(recent.world.viewer).get(url, HTTP_HX_REQUEST="true").content.decode()
    assert 'id="fit"' in viewer
    assert "Apply the" not in viewer
    stage = recent.retrieval
    refused = client_for(recent.world.viewer).post(url + "apply/", {f"stage-{stage.pk}": "450"})
    assert refused.status_code == 403
    outsider = client_for(recent.world.outsider).post(url + "apply/", {f"stage-{stage.pk}": "450"})
    assert outsider.status_code == 404
    other = client_for(recent.world.editor).post(
        url + "apply/", {f"stage-{recent.other_stage.pk}": "450"}
    )
    assert other.status_code == 302
    assert Stage.objects.get(pk=recent.other_stage.pk).budget_ms != 450
    done = client_for(recent.world.editor).post(url + "apply/", {f"stage-{stage.pk}": "450"})
    assert done.status_code == 302
    assert Stage.objects.get(pk=stage.pk).budget_ms == 450
    invalid = client_for(recent.world.editor).post(url + "apply/", {f"stage-{stage.pk}": "-3"})
    assert invalid.status_code == 302
    assert Stage.objects.get(pk=stage.pk).budget_ms == 450


def test_the_rule_tester_counts_the_spans_a_rule_matches(world: TeamWorld) -> None:
    pipeline = make_rag_pipeline(world.team)
    t0 = now_ns() - 10 * 60 * 1_000_000_000
    ingest(world.team, *(rag_spans(0xD0 + i, t0 + i * 1_000 * MS) for i in range(4)))
    retrieval = pipeline.stages.get(slug="retrieval")
    ttft = pipeline.stages.get(slug="ttft")
    base = f"/teams/acme/dashboards/{pipeline.slug}/stages/"
    client = client_for(world.viewer)
    found = client.get(
        f"{base}{retrieval.pk}/rule-test/",
        {"span_name": "vector.search*", "name_match": "glob", "portion": "whole"},
        HTTP_HX_REQUEST="true",
    ).content.decode()
    matched = re.search(r'data-role="matched">(\d+)<', found)
    assert matched
    assert int(matched.group(1)) == 8  # two retrieval spans in each of the four traces
    assert re.search(r'data-role="traces">4<', found)
    # A rule on a later stage for spans an earlier stage already takes says so.
    later = client.get(
        f"{base}{ttft.pk}/rule-test/",
        {"span_name": "auth*", "name_match": "glob", "portion": "whole"},
        HTTP_HX_REQUEST="true",
    ).content.decode()
    assert "an earlier stage whose rules match first" in later
    broken = client.get(f"{base}{retrieval.pk}/rule-test/", {"name_match": "nope"})
    assert broken.status_code == 200
    assert "Fix the rule" in broken.content.decode()
    assert client_for(world.outsider).get(f"{base}{retrieval.pk}/rule-test/").status_code == 404
