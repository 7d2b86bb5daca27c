"""The stage editor in a real browser: htmx swaps, the allocation bar, no page reloads."""

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connections

from apps.pipelines.models import Pipeline
from tests.factories import PASSWORD, make_team, make_user

CHROMIUM = (
    os.environ.get("CHROMIUM_PATH")
    or shutil.which("chromium")
    or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
)
SCREENSHOT = Path(tempfile.gettempdir()) / "stage_editor.png"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (/usr/bin/chromium)"),
]


@pytest.fixture
def page(
    transactional_db: None, live_server: Any, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    # Playwright's sync API runs an event loop in this thread; Django's ORM would refuse
    # it. Allowed for this test only, so no other test runs with the check off.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

    # The live server speaks plain HTTP.
    settings.SESSION_COOKIE_SECURE = False
    settings.CSRF_COOKIE_SECURE = False
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        page = browser.new_page(viewport={"width": 1200, "height": 1000})
        page.set_default_timeout(10_000)
        yield page
        browser.close()
        # Queries made while Playwright runs use their own connection (another
        # context); close it, or the test database cannot be dropped afterwards.
        connections.close_all()


def segment_slugs(page: Any) -> list[str]:
    return page.eval_on_selector_all(
        "#allocation-bar [data-stage]", "els => els.map(e => e.dataset.stage)"
    )


def stage_slugs(page: Any) -> list[str]:
    return page.eval_on_selector_all(
        "#stage-list [data-stage-slug]", "els => els.map(e => e.dataset.stageSlug)"
    )


def add_stage(page: Any, name: str, slug: str, budget_ms: str) -> None:
    form = page.locator(".stage-add form")
    form.locator("input[name=name]").fill(name)
    form.locator("input[name=slug]").fill(slug)
    form.locator("input[name=budget_ms]").fill(budget_ms)
    form.get_by_role("button", name="Add stage").click()


def test_stage_editor_adds_and_reorders_stages_without_reloading(
    page: Any, live_server: Any
) -> None:
    from playwright.sync_api import expect

    make_team("acme", owner=make_user("olivia"))

    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", "olivia")
    page.fill("input[name=password]", PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/teams/acme/pipelines/")

    page.get_by_role("link", name="New pipeline").click()
    page.fill("input[name=name]", "Support answer")
    page.fill("input[name=slug]", "support-answer")
    page.fill("input[name=budget_p95_ms]", "2000")
    page.get_by_role("button", name="Create pipeline").click()
    page.wait_for_url("**/teams/acme/pipelines/support-answer/")
    pipeline = Pipeline.objects.get(slug="support-answer")

    page.evaluate("window.__marker = 1")
    total = page.locator("#allocation-bar [data-role=total]")
    expect(total).to_have_text("allocated 0 ms of 2000 ms (0%)")
    assert segment_slugs(page) == []

    add_stage(page, "Retrieval", "retrieval", "400")
    expect(total).to_have_text("allocated 400 ms of 2000 ms (20%)")
    assert segment_slugs(page) == ["retrieval"]

    add_stage(page, "Generation", "generation", "1000")
    expect(total).to_have_text("allocated 1400 ms of 2000 ms (70%)")
    assert segment_slugs(page) == ["retrieval", "generation"]
    assert stage_slugs(page) == ["retrieval", "generation"]

    # A duplicate slug comes back as an inline error in the add form (HTTP 422 swapped in).
    add_stage(page, "Again", "retrieval", "10")
    expect(page.locator(".stage-add .errorlist")).to_contain_text("already has a stage")
    assert pipeline.stages.count() == 2

    page.locator('[data-stage-slug="retrieval"] [data-action=move-down]').click()
    expect(page.locator("#stage-list [data-stage-slug]").first).to_have_attribute(
        "data-stage-slug", "generation"
    )
    assert stage_slugs(page) == ["generation", "retrieval"]
    assert segment_slugs(page) == ["generation", "retrieval"]
    assert list(pipeline.stages.values_list("slug", flat=True)) == ["generation", "retrieval"]

    page.locator('[data-stage-slug="retrieval"] [data-action=move-up]').click()
    expect(page.locator("#stage-list [data-stage-slug]").first).to_have_attribute(
        "data-stage-slug", "retrieval"
    )
    assert list(pipeline.stages.values_list("slug", flat=True)) == ["retrieval", "generation"]

    assert page.evaluate("window.__marker") == 1
    page.screenshot(path=str(SCREENSHOT), full_page=True)
