"""The stage editor in a real browser: htmx swaps, the allocation bar, no page reloads."""

import tempfile
from pathlib import Path
from typing import Any

from apps.pipelines.models import Pipeline
from tests.browser_support import browser_marks
from tests.builders.configuration import PASSWORD, make_team, make_user

SCREENSHOT = Path(tempfile.gettempdir()) / "stage_editor.png"

pytestmark = browser_marks


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
    page.wait_for_url("**/teams/acme/dashboards/")
    page.get_by_role("link", name="Pipelines", exact=True).click()
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
    expect(total).to_have_text("allocated 0 ms of 2 s (0%)")
    assert segment_slugs(page) == []

    add_stage(page, "Retrieval", "retrieval", "400")
    expect(total).to_have_text("allocated 400 ms of 2 s (20%)")
    assert segment_slugs(page) == ["retrieval"]

    add_stage(page, "Generation", "generation", "1000")
    expect(total).to_have_text("allocated 1.4 s of 2 s (70%)")
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
