"""The trace list in a real browser: filters and orders change the list and the URL in
place, and the URL alone brings the same list back (reload, back button)."""

import os
from pathlib import Path
from typing import Any

from django.conf import settings as django_settings

from tests.browser_support import browser_marks
from tests.builders.configuration import PASSWORD
from tests.conftest import TeamWorld
from tests.dashboards.trace_catalog import Catalog, build_catalog

pytestmark = browser_marks

SCREENSHOTS = Path(os.environ.get("SCREENSHOT_DIR", Path(django_settings.VAR_DIR) / "screenshots"))


def rows(page: Any) -> list[str]:
    return [
        str(page.locator("#trace-results tbody tr").nth(i).get_attribute("data-trace"))
        for i in range(page.locator("#trace-results tbody tr").count())
    ]


def test_filters_update_the_list_and_the_url_which_restores_it(
    page: Any, live_server: Any, world: TeamWorld
) -> None:
    from playwright.sync_api import expect

    catalog: Catalog = build_catalog(world)
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", world.viewer.username)
    page.fill("input[name=password]", PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_load_state()

    page.goto(f"{live_server.url}/teams/acme/traces/")
    expect(page.locator("#trace-results tbody tr")).to_have_count(5)
    page.evaluate("window.__marker = 1")  # gone if the page reloads

    page.select_option("#id_status", "error")
    page.wait_for_url("**/traces/?*status=error*")
    expect(page.locator("#trace-results tbody tr")).to_have_count(1)
    assert rows(page) == catalog.named("failed")

    page.select_option("#id_status", "")
    page.wait_for_url("**status=&*")
    expect(page.locator("#trace-results tbody tr")).to_have_count(5)
    attribute = page.locator("input[name=attr]").first
    attribute.fill("user.id=42")
    attribute.press("Enter")  # a change and a submit: two requests for the same list
    page.wait_for_url("**attr=user.id%3D42*")
    page.wait_for_load_state("networkidle")
    expect(page.locator("#trace-results tbody tr")).to_have_count(3)
    assert rows(page) == catalog.named("health", "fresh", "failed")

    page.select_option("#id_sort", "slowest")
    page.wait_for_url("**sort=slowest*")
    expect(page.locator('#trace-results th[aria-sort="descending"]')).to_contain_text("Duration")
    assert rows(page) == catalog.named("failed", "fresh", "health")
    assert page.evaluate("window.__marker") == 1
    page.screenshot(path=str(SCREENSHOTS / "trace_list_filtered.png"), full_page=True)

    # The column header turns the order around; the filters stay.
    page.locator("#trace-results th a", has_text="Duration").click()
    page.wait_for_url("**sort=fastest*")
    expect(page.locator('#trace-results th[aria-sort="ascending"]')).to_contain_text("Duration")
    assert rows(page) == catalog.named("health", "fresh", "failed")
    assert "attr=user.id%3D42" in page.url
    assert page.evaluate("window.__marker") == 1

    # A reload is the URL alone: the same list, the same filters in the form.
    page.reload()
    expect(page.locator("#trace-results tbody tr")).to_have_count(3)
    assert rows(page) == catalog.named("health", "fresh", "failed")
    expect(page.locator("input[name=attr]").first).to_have_value("user.id=42")
    expect(page.locator("#id_sort")).to_have_value("fastest")
    assert page.evaluate("window.__marker") is None

    # Back goes to the list before, slowest first.
    page.go_back()
    page.wait_for_url("**sort=slowest*")
    expect(page.locator("#id_sort")).to_have_value("slowest")
    assert rows(page) == catalog.named("failed", "fresh", "health")

    # A shared link with a time range and a malformed filter says what is wrong.
    page.goto(f"{live_server.url}/teams/acme/traces/?window=24h&max_duration_ms=abc")
    expect(page.locator(".form-errors")).to_contain_text("Max duration (ms): Enter a whole number.")
    expect(page.locator("#id_window")).to_have_value("24h")
    assert problems == []
