"""A rule change, then "recompute" on the pipeline page, in a real browser.

The owner opens the dashboard after changing the rules: the figures say they predate
the change, the rerank stage has no samples. They recompute the last hour; the panel
follows the run by itself (htmx polls it) while the steps run as a worker runs them,
and once it is done the dashboard's figures are the new rules'. Any console error (a
Content-Security-Policy violation is one) fails the test.
"""

import os
import re
from pathlib import Path
from typing import Any

import numpy as np
from django.conf import settings as django_settings

from apps.analysis.models import Recompute, RecomputeStatus
from apps.analysis.services.recompute import StepOutcome, recompute_step
from tests.browser_support import browser_marks
from tests.builders.configuration import PASSWORD, make_team, make_user
from tests.builders.recompute_traces import (
    chat_pipeline,
    chat_traces,
    rollups_settle,
    rules_b,
    send,
)

pytestmark = browser_marks

SCREENSHOTS = Path(os.environ.get("SCREENSHOT_DIR", Path(django_settings.VAR_DIR) / "screenshots"))
TRACES = 120


def test_a_rule_change_then_recompute_changes_the_dashboards_figures(
    page: Any, live_server: Any, settings: Any
) -> None:
    from playwright.sync_api import expect

    owner = make_user("olivia")
    team = make_team("acme", owner=owner)
    chat = chat_pipeline(team)
    # The last hour's traffic, and earlier traffic a one-hour recompute leaves as it was.
    rng = np.random.default_rng(11)
    send(team, chat_traces(rng, count=TRACES, first_id=1, minutes_ago=(55, 1)))
    send(team, chat_traces(rng, count=60, first_id=1000, minutes_ago=(170, 70)))
    rules_b(chat)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", "olivia")
    page.fill("input[name=password]", PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/teams/acme/dashboards/")

    page.goto(f"{live_server.url}/teams/acme/dashboards/rag-chat/?window=6h")
    note = page.locator("[data-role=earlier-rules]")
    expect(note).to_contain_text("were computed with the earlier rules")
    rerank = page.locator('tr[data-stage="rerank"] [data-role=count]')
    expect(rerank).to_have_text("0")
    panel = page.locator("#recompute")
    expect(panel).to_contain_text("Recompute with the current rules")
    page.screenshot(path=str(SCREENSHOTS / "recompute_predates.png"), full_page=True)

    panel.locator("select[name=hours]").select_option("1")
    panel.get_by_role("button", name="Recompute").click()
    expect(panel.locator("[data-role=recompute-notice]")).to_contain_text("Recompute queued")
    run = Recompute.objects.get()
    # The worker's first steps: a batch at a time (ten traces), about half the window.
    settings.ANALYSIS_PASS_MAX_SPANS = 50
    for _ in range(6):
        assert recompute_step(run_id=run.pk, time_budget_s=0).outcome == StepOutcome.MORE
    expect(panel.locator(".recompute-run")).to_have_attribute("data-status", "running")
    expect(panel.locator("[data-role=recompute-count]")).to_contain_text(f"60 of {TRACES}")
    panel.scroll_into_view_if_needed()
    page.screenshot(path=str(SCREENSHOTS / "recompute_running.png"), full_page=True)
    panel.screenshot(path=str(SCREENSHOTS / "recompute_panel_running.png"))

    while recompute_step(run_id=run.pk).outcome != StepOutcome.FINISHED:
        pass
    rollups_settle()
    expect(panel.locator(".recompute-run")).to_have_attribute("data-status", "finished")
    expect(panel.locator("[data-role=rollups-pending]")).to_have_text("rebuilt")
    run.refresh_from_db()
    assert (run.status, run.done) == (RecomputeStatus.FINISHED, TRACES)

    page.reload()
    # The hour recomputed, the earlier traces not: the note moves to where it began.
    expect(note).to_contain_text("only the traces since")
    expect(rerank).not_to_have_text("0")
    assert int(rerank.inner_text().split()[0]) == TRACES
    page.screenshot(path=str(SCREENSHOTS / "recompute_finished.png"), full_page=True)
    panel.screenshot(path=str(SCREENSHOTS / "recompute_panel_finished.png"))
    page.goto(f"{live_server.url}/teams/acme/dashboards/rag-chat/?window=1h")
    expect(page.locator("[data-role=earlier-rules]")).to_have_count(0)
    page.goto(f"{live_server.url}/teams/acme/dashboards/rag-chat/stages/rerank/?window=6h")
    expect(page.locator("[data-role=earlier-rules]")).to_be_visible()
    page.screenshot(path=str(SCREENSHOTS / "recompute_stage_note.png"), full_page=True)
    # The stage editor, where the rules were changed, says what they apply to.
    page.goto(f"{live_server.url}/teams/acme/pipelines/rag-chat/")
    expect(page.locator("[data-role=rules-changed]")).to_contain_text("recompute them")
    page.screenshot(path=str(SCREENSHOTS / "recompute_editor_hint.png"), full_page=True)
    assert not [p for p in problems if not re.search(r"favicon", p)], problems
