"""Where each span counts, and why, in a real browser: the waterfall's stage column beside
the bars, the span panel's reason with a link to the span it inherits from, and a
no-stage rule added on the editor while its tester says what it keeps out."""

import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.browser_support import browser_marks
from tests.builders.configuration import PASSWORD
from tests.builders.ingested_traces import hex_of, ingest, now_ns
from tests.conftest import TeamWorld
from tests.dashboards.ordinary_app import (
    FLUSH,
    QUERY,
    REDIS,
    RETRIEVAL,
    newcomer_pipeline,
    ordinary_trace,
)
from tests.timing import MS

SCREENSHOTS = Path(os.environ.get("SCREENSHOT_DIR", tempfile.gettempdir()))
TRACES = 3

pytestmark = [*browser_marks, pytest.mark.slow]


def sign_in(page: Any, live_server: Any, username: str) -> None:
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/teams/acme/dashboards/")


def test_the_trace_page_says_where_each_span_counts_and_why(
    page: Any, live_server: Any, world: TeamWorld
) -> None:
    from playwright.sync_api import expect

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    newcomer_pipeline(world.team)
    t0 = now_ns() - 60_000 * MS
    ingest(world.team, *(ordinary_trace(0xC0 + n, t0 + n * 1500 * MS) for n in range(TRACES)))
    sign_in(page, live_server, "vera")
    page.goto(f"{live_server.url}/teams/acme/traces/{hex_of(0xC0)}/")

    query = page.locator(f'[data-span="{QUERY:016x}"] [data-role=span-stage]')
    expect(query).to_have_text("Retrieval inherited")
    expect(page.locator(f'[data-span="{FLUSH:016x}"] [data-role=span-stage]')).to_have_text(
        "no stage no-stage rule 1"
    )
    expect(page.locator(f'[data-span="{REDIS:016x}"] [data-role=span-stage]')).to_have_text(
        "untracked inherited"
    )
    # The stage column sits between the names and the bars, overlapping neither.
    row = page.locator(f'[data-span="{QUERY:016x}"]')
    label, stage, track = (
        row.locator(selector).bounding_box() for selector in (".wf-label", ".wf-stage", ".wf-track")
    )
    assert label is not None
    assert stage is not None
    assert track is not None
    assert label["x"] + label["width"] <= stage["x"] + 1
    assert stage["x"] + stage["width"] <= track["x"] + 1
    # … and no stage cell is cut, the split chat span's the longest.
    clipped = page.eval_on_selector_all(
        "#waterfall [data-role=span-stage]",
        "cells => cells.filter(c => c.scrollWidth > c.clientWidth).map(c => c.textContent)",
    )
    assert clipped == []
    page.locator("#waterfall").scroll_into_view_if_needed()
    page.screenshot(path=str(SCREENSHOTS / "trace_stage_reasons.png"), full_page=True)

    page.locator(f'[data-span="{QUERY:016x}"] .wf-label a').click()
    reason = page.locator("#span-panel [data-role=stage-reason]")
    expect(reason).to_contain_text("Retrieval — inside retrieval")
    page.locator("#span-panel").screenshot(path=str(SCREENSHOTS / "span_panel_inherited.png"))

    # The ancestor's link opens its details in place.
    reason.get_by_role("link").click()
    page.wait_for_url(f"**/?span={RETRIEVAL:016x}")
    expect(reason).to_have_text("Retrieval — rule 1: name = retrieval")
    page.locator("#span-panel").screenshot(path=str(SCREENSHOTS / "span_panel_rule.png"))


def test_an_editor_adds_a_no_stage_rule_seeing_what_it_keeps_out(
    page: Any, live_server: Any, world: TeamWorld
) -> None:
    from playwright.sync_api import expect

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    pipeline = newcomer_pipeline(world.team, no_stage=False)
    t0 = now_ns() - 60_000 * MS
    ingest(world.team, *(ordinary_trace(0xD0 + n, t0 + n * 1500 * MS) for n in range(TRACES)))
    sign_in(page, live_server, "eddie")
    page.goto(f"{live_server.url}/teams/acme/pipelines/{pipeline.slug}/")
    page.evaluate("window.__marker = 1")

    page.get_by_role("link", name="+ No-stage rule").click()
    form = page.locator("form.no-stage-rule-form")
    form.locator("input[name=span_name]").fill("cache flush")
    result = form.locator("[data-role=brought]")
    expect(result).to_contain_text(
        f"It also keeps {TRACES} spans inside them out of every stage, in {TRACES} traces"
    )
    expect(result).to_contain_text("until now: 2 ms in Retrieval")
    form.screenshot(path=str(SCREENSHOTS / "no_stage_rule_form.png"))

    form.get_by_role("button", name="Add rule").click()
    rule = pipeline.no_stage_rules.get
    expect(page.locator("#no-stage-rules .rule code")).to_have_text("name = cache flush")
    assert page.evaluate("window.__marker") == 1  # swapped in, not reloaded
    assert rule().span_name == "cache flush"
    page.locator("#no-stage-rules").scroll_into_view_if_needed()
    page.screenshot(path=str(SCREENSHOTS / "rules_editor_no_stage.png"), full_page=True)
