"""The trace explorer in a real browser: filters swap the results in place, the waterfall draws."""

import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.browser_support import browser_marks
from tests.builders.configuration import PASSWORD
from tests.builders.ingested_traces import OK, build_explorer, hex_of

SHOTS = Path(tempfile.gettempdir())

pytestmark = browser_marks


def test_filtering_traces_swaps_the_results_and_the_detail_draws_the_waterfall(
    page: Any, live_server: Any, world: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from playwright.sync_api import expect

    build_explorer(world)
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", "olivia")
    page.fill("input[name=password]", PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/teams/acme/dashboards/")
    page.get_by_role("link", name="Pipelines", exact=True).click()
    page.wait_for_url("**/teams/acme/pipelines/")
    expect(page.locator("#unmatched-summary table")).to_be_visible()
    page.screenshot(path=str(SHOTS / "pipelines_unmatched.png"), full_page=True)

    page.get_by_role("link", name="Traces", exact=True).click()
    page.wait_for_url("**/teams/acme/traces/")
    rows = page.locator("#trace-results tbody tr")
    expect(rows).to_have_count(7)
    page.evaluate("window.__marker = 1")
    page.select_option("select[name=pipeline]", "rag-chat")
    expect(rows).to_have_count(2)
    page.select_option("select[name=status]", "error")
    expect(rows).to_have_count(1)
    assert page.evaluate("window.__marker") == 1
    assert "pipeline=rag-chat" in page.url
    page.screenshot(path=str(SHOTS / "traces.png"), full_page=True)

    page.goto(f"{live_server.url}/teams/acme/traces/{hex_of(OK)}/")
    expect(page.locator("#waterfall [data-span]")).to_have_count(5)
    expect(page.locator("#stage-breakdown tfoot tr")).to_have_attribute("data-adds-up", "true")
    page.screenshot(path=str(SHOTS / "trace_detail.png"), full_page=True)

    # A big trace's rows come a page at a time; the next ones are appended in place.
    monkeypatch.setattr("apps.dashboards.views.traces.ROWS_PER_PAGE", 2)
    page.goto(f"{live_server.url}/teams/acme/traces/{hex_of(OK)}/")
    expect(page.locator("#waterfall [data-span]")).to_have_count(2)
    page.evaluate("window.__marker = 2")
    page.get_by_role("link", name="Next 2 spans").click()
    expect(page.locator("#waterfall [data-span]")).to_have_count(4)
    page.get_by_role("link", name="Next 1 span").click()
    expect(page.locator("#waterfall [data-span]")).to_have_count(5)
    expect(page.locator("#waterfall .wf-more")).to_have_count(0)
    assert page.evaluate("window.__marker") == 2
    assert page.url.endswith(f"/traces/{hex_of(OK)}/")
    # An appended row's span opens its details like any other.
    page.locator("#waterfall [data-span]").last.locator(".wf-label a").click()
    expect(page.locator("#span-panel [data-span-details]")).to_be_visible()
    assert page.evaluate("window.__marker") == 2

    page.goto(f"{live_server.url}/teams/acme/traces/unmatched/")
    page.screenshot(path=str(SHOTS / "unmatched.png"), full_page=True)
