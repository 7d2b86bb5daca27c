"""The waterfall's columns in a real browser: a trace with long span names and the
longest durations the pages write keeps every duration whole in its column."""

import os
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings

from apps.core.figures import format_ms
from tests.browser_support import browser_marks
from tests.builders.configuration import PASSWORD
from tests.builders.ingested_traces import hex_of, ingest, make_rag_pipeline, now_ns
from tests.builders.spans import span
from tests.conftest import TeamWorld
from tests.timing import HOUR

SCREENSHOTS = Path(os.environ.get("SCREENSHOT_DIR", Path(django_settings.VAR_DIR) / "screenshots"))

pytestmark = [*browser_marks, pytest.mark.slow]

LONG_TRACE = 0xC1
LONG_NAME = "POST /api/v2/conversations/{conversation_id}/messages/{message_id}/regenerate" * 2
# Durations in µs, each written at its longest: minutes and seconds, seconds with two
# decimals, a rounding up to a second, ms with a decimal, under 0.1 ms.
CHILDREN_US = [3_599_400_000, 1_331_469, 999_950, 145_250, 12_300, 40]


def long_trace(world: TeamWorld) -> str:
    make_rag_pipeline(world.team)
    t0 = now_ns() - 2 * HOUR
    root_us = 3_599_499_000  # 59 min 59 s
    spans = [
        span(1, None, t0, t0 + root_us * 1000, name=LONG_NAME, kind="server",
             service="chat-api-with-a-long-service-name", trace_id=LONG_TRACE),
    ]  # fmt: skip
    parent = 1
    for number, micros in enumerate(CHILDREN_US, start=2):
        # Each a child of the last, so the names are indented as deep as they go.
        spans.append(
            span(number, parent, t0, t0 + micros * 1000,
                 name=f"{'retrieval.vector_store.query' * 3} {number}", trace_id=LONG_TRACE)
        )  # fmt: skip
        parent = number
    ingest(world.team, spans)
    return hex_of(LONG_TRACE)


def test_the_duration_column_shows_every_duration_whole(
    page: Any, live_server: Any, world: TeamWorld
) -> None:
    from playwright.sync_api import expect

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    trace_hex = long_trace(world)
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", "vera")
    page.fill("input[name=password]", PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/teams/acme/dashboards/")

    for width in (1200, 900):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{live_server.url}/teams/acme/traces/{trace_hex}/")
        cells = page.locator("#waterfall .wf-ms")
        expect(cells).to_have_count(1 + 1 + len(CHILDREN_US))  # the head, the root, children
        overflowing = page.evaluate(
            """() => [...document.querySelectorAll('#waterfall .wf-ms')]
                .filter(cell => cell.scrollWidth > cell.clientWidth)
                .map(cell => `${cell.textContent}: ${cell.scrollWidth} > ${cell.clientWidth}`)"""
        )
        assert overflowing == []
        shown = cells.all_inner_texts()
        expected = [format_ms(us / 1000) for us in [3_599_499_000, *CHILDREN_US]]
        assert shown == ["Duration", *expected]
        assert "59 min 59 s" in shown
        # The column is inside the waterfall's box, not pushed past its edge.
        box = page.locator("#waterfall").bounding_box()
        last = cells.nth(1).bounding_box()
        assert box is not None
        assert last is not None
        if width == 1200:
            assert last["x"] + last["width"] <= box["x"] + box["width"] + 0.5
            page.locator("#waterfall").screenshot(path=str(SCREENSHOTS / "waterfall_long.png"))
