"""A span's details in a real browser: opened in place by their own request, a long value
cut with a note that reads apart from it, the waterfall still beside them."""

import os
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings

from tests.browser_support import browser_marks
from tests.builders.configuration import PASSWORD
from tests.builders.ingested_traces import TOOL, build_detailed
from tests.conftest import TeamWorld

SCREENSHOTS = Path(os.environ.get("SCREENSHOT_DIR", Path(django_settings.VAR_DIR) / "screenshots"))

pytestmark = [*browser_marks, pytest.mark.slow]


def test_a_spans_details_open_in_place_with_long_values_cut(
    page: Any, live_server: Any, world: TeamWorld
) -> None:
    from playwright.sync_api import expect

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    detailed = build_detailed(world)
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", "vera")
    page.fill("input[name=password]", PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/teams/acme/dashboards/")
    page.goto(f"{live_server.url}/teams/acme/traces/{detailed.trace_hex}/")
    expect(page.locator("#waterfall [data-span]")).to_have_count(6)
    page.evaluate("window.__marker = 1")

    page.locator(f'[data-span="{TOOL:016x}"] .wf-label a').click()

    details = page.locator(f'#span-panel [data-span-details="{TOOL:016x}"]')
    expect(details).to_be_visible()
    page.wait_for_url(f"**/traces/*/?span={TOOL:016x}")
    assert page.evaluate("window.__marker") == 1  # swapped in, not a new page
    assert requests[-1].endswith(f"?span={TOOL:016x}")
    notes = page.locator("#span-panel [data-role=cut]")
    expect(notes).to_have_count(2)
    expect(notes.first).to_have_text("… cut: the first 2000 of 6,000 characters")
    expect(page.locator("#span-panel [data-role=events] li")).to_have_count(1)
    # The cut value and its note do not overlap: the note starts below the value's text.
    value = page.locator("#span-panel .span-value").filter(has_text="00000 00001").first
    value_box, note_box = value.bounding_box(), notes.first.bounding_box()
    assert value_box is not None
    assert note_box is not None
    assert note_box["y"] >= value_box["y"] + value_box["height"] - 1
    page.locator("#waterfall").scroll_into_view_if_needed()
    page.screenshot(path=str(SCREENSHOTS / "trace_span_panel.png"))
    notes.first.scroll_into_view_if_needed()
    page.locator("#span-panel").screenshot(path=str(SCREENSHOTS / "trace_span_panel_cut.png"))
