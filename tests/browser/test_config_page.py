"""The configuration page in a real browser, as a viewer of a team with a Slack webhook:
the URL shows its host only, and no signing secret is anywhere on the page."""

import os
from pathlib import Path
from typing import Any

from django.conf import settings as django_settings

from apps.alerts.models import ChannelKind
from apps.alerts.services.channels import channel_create
from apps.teams.models import Role
from tests.browser_support import browser_marks
from tests.builders.configuration import PASSWORD, add_member, make_team, make_user

pytestmark = browser_marks

SCREENSHOTS = Path(os.environ.get("SCREENSHOT_DIR", Path(django_settings.VAR_DIR) / "screenshots"))
SLACK = "https://hooks.slack.com/services/T0001/B0002/slacktokenslacktoken"


def test_a_viewer_sees_the_webhook_url_masked_and_no_secret(page: Any, live_server: Any) -> None:
    from playwright.sync_api import expect

    team = make_team("acme", owner=make_user("olivia"))
    add_member(team, make_user("vera"), Role.VIEWER)
    hook = channel_create(
        team=team, slug="slack", name="Slack", kind=ChannelKind.WEBHOOK, url=SLACK, format="slack"
    )
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)

    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", "vera")
    page.fill("input[name=password]", PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/teams/acme/**")
    page.goto(f"{live_server.url}/teams/acme/config/")

    shown = page.locator("pre.current-yaml")
    expect(shown).to_contain_text("url: https://hooks.slack.com/…")
    page.screenshot(path=str(SCREENSHOTS / "config_page_viewer.png"), full_page=True)
    html = page.content()
    assert "slacktoken" not in html
    assert "/services/" not in html
    assert hook.secret not in html
    assert page.locator("textarea[name=text]").count() == 0
    assert problems == []
