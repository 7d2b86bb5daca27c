"""The API docs in a real browser: linked from the navigation, served from this host, and
not one Content-Security-Policy complaint on the console."""

import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.conf import settings as django_settings

from tests.browser_support import browser_marks
from tests.builders.configuration import PASSWORD
from tests.conftest import TeamWorld

SCREENSHOTS = Path(os.environ.get("SCREENSHOT_DIR", Path(django_settings.VAR_DIR) / "screenshots"))

pytestmark = [*browser_marks, pytest.mark.slow]


def test_the_api_docs_open_from_the_navigation_without_a_csp_error(
    page: Any, live_server: Any, world: TeamWorld
) -> None:
    from playwright.sync_api import expect

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    console: list[str] = []
    page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
    page.on("pageerror", lambda e: console.append(f"pageerror: {e}"))
    hosts: set[str] = set()
    page.on("request", lambda request: hosts.add(urlsplit(request.url).netloc))

    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", "vera")
    page.fill("input[name=password]", PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/teams/acme/dashboards/")

    page.locator("nav.topnav").get_by_role("link", name="API docs").click()
    page.wait_for_url("**/api/docs/")
    # Swagger UI ran: the operations of the schema are listed.
    expect(page.locator(".swagger-ui .opblock").first).to_be_visible(timeout=20_000)
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("Latency Budgets API")
    expect(
        page.locator(".api-docs-bar").get_by_role("link", name="← Latency Budgets")
    ).to_be_visible()
    page.screenshot(path=str(SCREENSHOTS / "api_docs.png"))

    csp = [line for line in console if "Content Security Policy" in line or "CSP" in line]
    assert csp == []
    assert [line for line in console if line.startswith(("error", "pageerror"))] == []
    assert hosts == {urlsplit(live_server.url).netloc}  # no CDN
