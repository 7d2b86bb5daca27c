"""The dashboards in a real browser, on traffic simulated through the OTLP endpoint.

A user signs in, lands on the team home, opens the pipeline, changes the range and the
percentile (the URL follows, the page is not reloaded), opens a stage, opens one of its
slowest traces with the critical path drawn, and tries a span rule as it is typed. Any
console error (a Content-Security-Policy violation is one) fails the test.
"""

import os
import random
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.utils import timezone
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from apps.analysis.services.finalize import traces_finalize_due
from apps.demo.traffic import TracePlanner, emit_trace, shape_for_pipeline
from apps.ingest.services.batches import raw_batches_drain
from apps.pipelines.config_as_code.apply import config_apply, config_parse_for_team
from apps.pipelines.models import Pipeline
from apps.rollups.services.bucket_pass import rollups_process_dirty
from apps.teams.models import Team
from apps.teams.services import ingest_token_create
from tests.browser_support import browser_marks
from tests.builders.configuration import PASSWORD, make_team, make_user

pytestmark = browser_marks

SCREENSHOTS = Path(os.environ.get("SCREENSHOT_DIR", Path(django_settings.VAR_DIR) / "screenshots"))
TRACES = 240


def simulate(live_server: Any, team: Team, pipeline: Pipeline, owner: Any) -> None:
    """Traces of the demo's RAG shape over the last 40 minutes, sent by the official
    exporter, then drained, analyzed and rolled up as the workers would."""
    _, token = ingest_token_create(team=team, name="browser test", created_by=owner)
    provider = TracerProvider(resource=Resource.create({"service.name": "chat-api"}))
    exporter = OTLPSpanExporter(
        endpoint=f"{live_server.url}/v1/traces",
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )
    provider.add_span_processor(BatchSpanProcessor(exporter, max_export_batch_size=512))
    tracer = provider.get_tracer("browser-test")
    planner = TracePlanner(rng=random.Random(5), shape=shape_for_pipeline(pipeline=pipeline))
    now = time.time_ns()
    for number in range(TRACES):
        start = now - (40 * 60 - number * 10) * 1_000_000_000
        emit_trace(tracer=tracer, plan=planner.plan(), start_ns=start)
    provider.shutdown()
    while raw_batches_drain().more:
        pass
    later = timezone.now() + timedelta(minutes=5)
    while traces_finalize_due(now=later).traces:
        pass
    while rollups_process_dirty().buckets:
        pass


@pytest.fixture
def demo(live_server: Any) -> Pipeline:
    owner = make_user("olivia")
    team = make_team("demo", owner=owner)
    text = (Path(django_settings.BASE_DIR) / "demo" / "budgets.yaml").read_text()
    config_apply(document=config_parse_for_team(team=team, text=text))
    pipeline = Pipeline.objects.get(team=team, slug="rag-chat")
    simulate(live_server, team, pipeline, owner)
    return pipeline


def test_a_user_reads_the_dashboards_and_tries_a_rule(
    page: Any, live_server: Any, demo: Any
) -> None:
    from playwright.sync_api import expect

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))

    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", "olivia")
    page.fill("input[name=password]", PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/teams/demo/dashboards/")
    row = page.locator('tr[data-pipeline="rag-chat"]')
    expect(row).to_be_visible()
    expect(row.locator("[data-role=e2e] .figure")).not_to_have_text("—")
    page.screenshot(path=str(SCREENSHOTS / "team_home.png"), full_page=True)

    row.get_by_role("link", name="RAG chat answer").click()
    page.wait_for_url("**/teams/demo/dashboards/rag-chat/**")
    page.evaluate("window.__marker = 1")  # gone if the page reloads
    expect(page.locator(".line-chart path.series")).to_have_count(1)
    before = page.locator(".line-chart path.series").get_attribute("d")

    page.locator('nav[aria-label=Percentile] a:text-is("p99")').click()
    expect(page.locator('nav[aria-label=Percentile] a[aria-current="true"]')).to_have_text("p99")
    assert "percentile=p99" in page.url
    page.locator('nav[aria-label=Range] a:text-is("6 hours")').click()
    expect(page.locator('nav[aria-label=Range] a[aria-current="true"]')).to_have_text("6 hours")
    assert "window=6h" in page.url
    assert page.evaluate("window.__marker") == 1
    assert page.locator(".line-chart path.series").get_attribute("d") != before
    expect(page.locator(".stacked-bar rect").first).to_be_visible()
    page.screenshot(path=str(SCREENSHOTS / "pipeline_dashboard.png"), full_page=True)

    page.locator('tr[data-stage="retrieval"] a').first.click()
    page.wait_for_url("**/stages/retrieval/**")
    expect(page.locator(".histogram rect.bar").first).to_be_visible()
    page.screenshot(path=str(SCREENSHOTS / "stage.png"), full_page=True)

    page.locator("table.slowest tbody tr a").first.click()
    page.wait_for_url("**/traces/*/")
    expect(page.locator(".wf-critical").first).to_be_attached()
    expect(page.locator(".wf-row.on-path").first).to_be_visible()
    page.screenshot(path=str(SCREENSHOTS / "trace_detail.png"), full_page=True)

    # A span's details come in place, at a URL that can be shared, and go again.
    page.evaluate("window.__marker = 2")
    path_row = page.locator(".wf-row.on-path").nth(1)
    span_id = path_row.get_attribute("data-span")
    path_row.locator(".wf-label a").click()
    details = page.locator(f'#span-panel [data-span-details="{span_id}"]')
    expect(details).to_be_visible()
    expect(details.locator("dt", has_text="critical")).to_be_visible()
    page.wait_for_url(f"**/traces/*/?span={span_id}")
    assert page.evaluate("window.__marker") == 2
    page.screenshot(path=str(SCREENSHOTS / "trace_span_details.png"), full_page=True)
    page.locator("#span-panel").get_by_role("link", name="Close").click()
    expect(details).to_have_count(0)
    page.wait_for_url("**/traces/*/")
    assert page.evaluate("window.__marker") == 2

    page.goto(f"{live_server.url}/teams/demo/pipelines/rag-chat/")
    stage = page.locator('[data-stage-slug="rerank"]')
    stage.get_by_role("link", name="+ Span rule").click()
    form = page.locator("form.rule-form")
    form.locator("input[name=span_name]").fill("rerank*")
    result = form.locator(".rule-test-result [data-role=matched]")
    expect(result).not_to_have_text("0")
    page.screenshot(path=str(SCREENSHOTS / "rule_tester.png"), full_page=True)

    # The dark theme follows the system's preference.
    page.emulate_media(color_scheme="dark")
    page.goto(f"{live_server.url}/teams/demo/dashboards/rag-chat/?window=1h")
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background != "rgb(246, 247, 249)"
    page.screenshot(path=str(SCREENSHOTS / "pipeline_dashboard_dark.png"), full_page=True)

    assert problems == []
