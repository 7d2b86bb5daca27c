"""A stage's degrade policy set through its form in a real browser: htmx swaps, the lever
boxes kept consistent by the page's script, the policy stored."""

from typing import Any

from apps.pipelines.models import Stage
from tests.browser_support import browser_marks
from tests.builders.configuration import PASSWORD, make_pipeline, make_stage, make_team, make_user

pytestmark = browser_marks


def sign_in(page: Any, base_url: str) -> None:
    page.goto(f"{base_url}/accounts/login/")
    page.fill("input[name=username]", "olivia")
    page.fill("input[name=password]", PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/teams/acme/dashboards/")


def test_an_editor_sets_a_stage_policy_through_the_page(page: Any, live_server: Any) -> None:
    from playwright.sync_api import expect

    team = make_team("acme", owner=make_user("olivia"))
    pipeline = make_pipeline(team, "rag-chat", budget={"p95": 2000})
    make_stage(pipeline, "retrieval", budget_ms=400)
    rerank = make_stage(pipeline, "rerank", name="Rerank", budget_ms=200)

    sign_in(page, live_server.url)
    page.goto(f"{live_server.url}/teams/acme/pipelines/rag-chat/")
    page.evaluate("window.__marker = 1")
    line = page.locator(f"#degrade-{rerank.pk} [data-role=degrade-policy]")
    expect(line).to_contain_text("every lever, with the stage's own figures")

    page.locator(f"#degrade-{rerank.pk} [data-action=edit-degrade]").click()
    form = page.locator(".degrade-form")
    expect(form).to_be_visible()
    expect(form.locator("input[name=levers_mode][value=all]")).to_be_checked()
    # Unticking a lever chooses "only the levers ticked" by itself.
    form.get_by_label("fallback:").uncheck()
    form.get_by_label("hedge:").uncheck()
    expect(form.locator("input[name=levers_mode][value=chosen]")).to_be_checked()

    form.get_by_label("First-token timeout (ms)").fill("soon")
    form.get_by_role("button", name="Save levers").click()
    expect(page.locator(".degrade-form .errorlist")).to_contain_text(
        "first_token_ms: whole milliseconds from 1 to 600000."
    )
    assert Stage.objects.get(pk=rerank.pk).degrade == {}

    form = page.locator(".degrade-form")
    form.get_by_label("First-token timeout (ms)").fill("800")
    # A delay typed in milliseconds picks "a fixed time" by itself.
    form.get_by_label("Hedge after (ms)").fill("450")
    expect(form.locator("select[name=hedge_after]")).to_have_value("ms")
    form.get_by_label("Cap (ms)").fill("250")
    form.get_by_role("button", name="Save levers").click()

    expect(line).to_have_text(
        "levers skip, cap; first token 800 ms; hedge after 450 ms; cap 250 ms"
    )
    assert Stage.objects.get(pk=rerank.pk).degrade == {
        "levers": ["skip", "cap"],
        "first_token_ms": 800,
        "hedge_after": 450,
        "cap_ms": 250,
    }
    assert page.evaluate("window.__marker") == 1

    # From the stage's dashboard page the form is a page of its own.
    page.goto(f"{live_server.url}/teams/acme/dashboards/rag-chat/stages/rerank/")
    page.locator("[data-role=degrade-policy]").get_by_role("link", name="Change it").click()
    form = page.locator(".degrade-form")
    form.get_by_label("Every lever (the default)").check()
    expect(form.get_by_label("fallback:")).to_be_checked()
    form.locator("select[name=hedge_after]").select_option("p99")
    form.get_by_label("Hedge after (ms)").fill("")
    form.get_by_role("button", name="Save levers").click()
    page.wait_for_url("**/teams/acme/pipelines/rag-chat/")
    expect(line).to_have_text("every lever; first token 800 ms; hedge after p99; cap 250 ms")
    assert Stage.objects.get(pk=rerank.pk).degrade == {
        "first_token_ms": 800,
        "hedge_after": "p99",
        "cap_ms": 250,
    }
