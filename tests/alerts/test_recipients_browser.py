"""In a real browser: the channels page shows each address in its state, a writer resends
a confirmation, and the address's own page confirms with a button."""

import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from django.utils import timezone

from apps.alerts.models import ChannelKind, ChannelRecipient, RecipientState
from apps.alerts.recipient_links import recipient_url
from apps.alerts.services.channels import channel_create
from apps.alerts.services.recipients import recipient_answer
from tests.browser_support import browser_marks
from tests.builders.alerts import webhook_channel
from tests.builders.configuration import PASSWORD, verify_email
from tests.conftest import TeamWorld

SHOTS = Path(tempfile.gettempdir())
WAITING = "oncall@partner.example.com"
UNSENT = "pager@partner.example.com"
DECLINED = "someone@elsewhere.example.com"

pytestmark = browser_marks


def test_the_channels_page_shows_each_address_and_its_own_page_confirms(
    page: Any, live_server: Any, world: TeamWorld
) -> None:
    from playwright.sync_api import expect

    verify_email(world.editor)
    channel = channel_create(
        team=world.team,
        slug="team-mail",
        name="Acme on-call",
        kind=ChannelKind.EMAIL,
        email_to=[WAITING, UNSENT, DECLINED, world.editor.email],
    )
    rows = ChannelRecipient.objects.filter(channel=channel)
    rows.update(confirmation_due_at=None, confirmation_sent_at=timezone.now() - timedelta(hours=1))
    rows.filter(email=UNSENT).update(
        confirmation_sent_at=None,
        confirmation_error="SMTP server unreachable: [Errno 111] Connection refused",
    )
    recipient_answer(recipient=rows.get(email=DECLINED), confirm=False)
    webhook_channel(world.team)

    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", "olivia")
    page.fill("input[name=password]", PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.goto(f"{live_server.url}/teams/acme/alerts/channels/")
    addresses = page.locator("ul.recipients li")
    expect(addresses).to_have_count(4)
    expect(page.locator(f'li[data-address="{WAITING}"] .badge')).to_have_text("waiting")
    expect(page.locator(f'li[data-address="{DECLINED}"] .badge')).to_have_text("declined")
    expect(page.locator(f'li[data-address="{world.editor.email}"] .badge')).to_have_text("member")
    expect(page.locator("#verify-notice")).to_be_visible()
    page.screenshot(path=str(SHOTS / "channels_recipients.png"), full_page=True)

    page.locator(f'li[data-address="{WAITING}"]').get_by_role("button", name="Resend").click()
    expect(page.locator(".messages")).to_contain_text(f"on its way to {WAITING} again")

    # The address's own page, as its owner opens it from the e-mail: no account needed.
    path = urlsplit(recipient_url(rows.get(email=WAITING))).path
    page.context.clear_cookies()
    page.goto(f"{live_server.url}{path}")
    expect(page.get_by_role("button", name="Yes, send me these alerts")).to_be_visible()
    expect(page.locator("body")).not_to_contain_text("Acme")
    page.screenshot(path=str(SHOTS / "recipient_confirm.png"), full_page=True)
    page.get_by_role("button", name="Yes, send me these alerts").click()
    expect(page.get_by_role("button", name="Stop these e-mails")).to_be_visible()
    page.screenshot(path=str(SHOTS / "recipient_confirmed.png"), full_page=True)
    assert rows.get(email=WAITING).state == RecipientState.CONFIRMED
