"""The trace explorer in a real browser: filters swap the results in place, the waterfall draws."""

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connections

from tests.dashboards.builders import OK, build_explorer, hex_of
from tests.factories import PASSWORD

CHROMIUM = (
    os.environ.get("CHROMIUM_PATH")
    or shutil.which("chromium")
    or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
)
SHOTS = Path(tempfile.gettempdir())

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (/usr/bin/chromium)"),
]


@pytest.fixture
def page(
    transactional_db: None, live_server: Any, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    # Playwright's sync API runs an event loop in this thread; allowed for this test only.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    settings.SESSION_COOKIE_SECURE = False
    settings.CSRF_COOKIE_SECURE = False
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=["--no-sandbox", "--disable-gpu", "--no-first-run"],
        )
        page = browser.new_page(viewport={"width": 1200, "height": 1000})
        page.set_default_timeout(10_000)
        yield page
        browser.close()
        connections.close_all()


def test_filtering_traces_swaps_the_results_and_the_detail_draws_the_waterfall(
    page: Any, live_server: Any, world: Any
) -> None:
    from playwright.sync_api import expect

    build_explorer(world)
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", "olivia")
    page.fill("input[name=password]", PASSWORD)
    page.get_by_role("button", name="Sign in").click()
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

    page.goto(f"{live_server.url}/teams/acme/traces/unmatched/")
    page.screenshot(path=str(SHOTS / "unmatched.png"), full_page=True)
