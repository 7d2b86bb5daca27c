"""In a real browser: a new user is offered verification, opens the mailed link and
presses Verify; the notice is gone."""

import re
import tempfile
from pathlib import Path
from typing import Any

from django.core import mail

from tests.browser_support import browser_marks

SHOTS = Path(tempfile.gettempdir())
PASSWORD = "a-much-longer-passphrase-42"
LINK = re.compile(r"https?://[^/\s]+(/accounts/email/verify/[^/\s]+/)")

pytestmark = browser_marks


def test_a_new_user_verifies_the_address_from_the_mailed_link(
    page: Any, live_server: Any, clean_cache: None
) -> None:
    from playwright.sync_api import expect

    page.goto(f"{live_server.url}/accounts/signup/")
    page.fill("input[name=username]", "nina")
    page.fill("input[name=email]", "nina@example.com")
    page.fill("input[name=password1]", PASSWORD)
    page.fill("input[name=password2]", PASSWORD)
    page.get_by_role("button", name="Sign up").click()
    page.wait_for_url("**/teams/new/")
    expect(page.locator("#verify-notice")).to_be_visible()
    expect(page.locator(".messages")).to_contain_text("A link to verify nina@example.com")

    page.get_by_role("link", name="Why").click()
    expect(page.locator(".badge.warn")).to_have_text("not verified")
    page.screenshot(path=str(SHOTS / "account_email.png"), full_page=True)

    (path,) = LINK.findall(str(mail.outbox[-1].body))
    page.goto(f"{live_server.url}{path}")
    page.screenshot(path=str(SHOTS / "email_verify.png"), full_page=True)
    page.get_by_role("button", name="Verify").click()
    page.wait_for_url("**/accounts/email/")
    expect(page.locator(".badge.ok")).to_have_text("verified")
    page.goto(f"{live_server.url}/teams/new/")
    expect(page.locator("#verify-notice")).to_have_count(0)
