"""Each address of an e-mail channel and its state, on the channels page and in the API,
for owner, editor, viewer and outsider; resending a confirmation is a writer's, and
limited per address and per account."""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.core import mail
from django.core.exceptions import ValidationError
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from apps.alerts.models import Channel, ChannelKind, ChannelRecipient, RecipientState
from apps.alerts.recipient_links import recipient_url
from apps.alerts.services.channels import channel_create
from apps.alerts.services.recipients import recipient_answer, recipient_confirmation_resend
from tests.builders.api import error_of, token_client
from tests.builders.configuration import verify_email
from tests.conftest import TeamWorld, client_for

MEMBERS = ["owner", "editor", "viewer"]
WRITERS = ["owner", "editor"]
ASKED = "asked@elsewhere.example.com"
DECLINED = "declined@elsewhere.example.com"
API = "/api/v1/channels/team-mail/"
RESEND_API = API + "resend-confirmation"


@dataclass
class Addresses:
    world: TeamWorld
    channel: Channel
    asked: ChannelRecipient
    declined: ChannelRecipient


@pytest.fixture
def addresses(world: TeamWorld, clean_cache: None) -> Addresses:
    """team-mail: one address asked an hour ago, one that declined, the editor's (verified)."""
    verify_email(world.editor)
    channel = channel_create(
        team=world.team,
        slug="team-mail",
        kind=ChannelKind.EMAIL,
        email_to=[ASKED, DECLINED, world.editor.email],
    )
    hour_ago = timezone.now() - timedelta(hours=1)
    ChannelRecipient.objects.filter(channel=channel).update(
        confirmation_due_at=None, confirmation_sent_at=hour_ago
    )
    declined = recipient_answer(
        recipient=ChannelRecipient.objects.get(email=DECLINED), confirm=False
    )
    return Addresses(world, channel, ChannelRecipient.objects.get(email=ASKED), declined)


def page_url(team: str = "acme") -> str:
    return reverse("alerts:channels", kwargs={"team_slug": team})


def resend_url(a: Addresses, recipient: ChannelRecipient) -> str:
    return reverse(
        "alerts:recipient_resend",
        kwargs={"team_slug": "acme", "channel_slug": "team-mail", "recipient_id": recipient.pk},
    )


def sent_at(recipient: ChannelRecipient) -> Any:
    recipient.refresh_from_db()
    return recipient.confirmation_due_at


@pytest.mark.parametrize("role", MEMBERS)
def test_every_member_sees_each_address_with_its_state(addresses: Addresses, role: str) -> None:
    page = client_for(getattr(addresses.world, role)).get(page_url()).content.decode()
    assert f'data-address="{ASKED}" data-state="waiting"' in page
    assert f'data-address="{DECLINED}" data-state="declined"' in page
    editor = addresses.world.editor.email
    assert f'data-address="{editor}" data-state="confirmed"' in page
    assert ">member</span>" in page


@pytest.mark.parametrize("role", MEMBERS)
def test_every_member_reads_the_states_in_the_api(addresses: Addresses, role: str) -> None:
    body = token_client(getattr(addresses.world, role)).get(API).json()
    assert [(r["address"], r["state"], r["verified_member"]) for r in body["recipients"]] == [
        (ASKED, "waiting", False),
        (DECLINED, "declined", False),
        (addresses.world.editor.email, "confirmed", True),
    ]
    assert body["recipients"][0]["confirmation_sent_at"] is not None
    listed = token_client(getattr(addresses.world, role)).get("/api/v1/channels/").json()
    assert listed["results"][0]["recipients"] == body["recipients"]


def test_only_writers_see_the_resend_button_and_only_for_waiting_addresses(
    addresses: Addresses,
) -> None:
    for role, shown in [("owner", True), ("editor", True), ("viewer", False)]:
        page = client_for(getattr(addresses.world, role)).get(page_url()).content.decode()
        assert (resend_url(addresses, addresses.asked) in page) is shown
        assert resend_url(addresses, addresses.declined) not in page


@pytest.mark.parametrize("role", WRITERS)
def test_writers_resend_a_confirmation_on_the_page(
    addresses: Addresses,
    role: str,
    eager: None,
    django_capture_on_commit_callbacks: Callable[..., Any],
) -> None:
    client = client_for(getattr(addresses.world, role))
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(resend_url(addresses, addresses.asked))
    assert response.status_code == 302
    (message,) = mail.outbox
    assert message.to == [ASKED]
    assert "is on its way to" in client.get(page_url()).content.decode()


@pytest.mark.parametrize("role", WRITERS)
def test_writers_resend_a_confirmation_through_the_api(addresses: Addresses, role: str) -> None:
    response = token_client(getattr(addresses.world, role)).post(
        RESEND_API, {"address": ASKED.upper()}, format="json"
    )
    assert response.status_code == 202
    assert response.json()["address"] == ASKED
    assert sent_at(addresses.asked) is not None


def test_a_viewer_gets_403_on_resend_and_nothing_is_sent(addresses: Addresses) -> None:
    viewer = addresses.world.viewer
    assert client_for(viewer).post(resend_url(addresses, addresses.asked)).status_code == 403
    response = token_client(viewer).post(RESEND_API, {"address": ASKED}, format="json")
    assert response.status_code == 403
    assert sent_at(addresses.asked) is None


def test_an_outsider_gets_404_for_the_page_the_api_and_resend(addresses: Addresses) -> None:
    outsider = addresses.world.outsider
    assert client_for(outsider).get(page_url()).status_code == 404
    assert client_for(outsider).post(resend_url(addresses, addresses.asked)).status_code == 404
    api = token_client(outsider)
    assert api.get(API, {"team": "acme"}).status_code == 404
    assert api.post(RESEND_API + "?team=acme", {"address": ASKED}, format="json").status_code == 404
    assert sent_at(addresses.asked) is None


def test_another_teams_recipient_cannot_be_resent_through_ones_own_channel(
    addresses: Addresses, world: TeamWorld
) -> None:
    channel_create(
        team=world.other_team, slug="team-mail", kind=ChannelKind.EMAIL, email_to=["g@x.io"]
    )
    outsider = client_for(world.outsider)
    url = reverse(
        "alerts:recipient_resend",
        kwargs={
            "team_slug": "globex",
            "channel_slug": "team-mail",
            "recipient_id": addresses.asked.pk,
        },
    )
    assert outsider.post(url).status_code == 404
    assert sent_at(addresses.asked) is None


@pytest.mark.parametrize(
    ("address", "message"),
    [
        ("nobody@example.com", "is not an address of this channel"),
        (DECLINED, "declined this channel"),
        ("eddie@example.com", "receives this channel already"),
    ],
)
def test_only_a_waiting_address_can_be_resent(
    addresses: Addresses, address: str, message: str
) -> None:
    response = token_client(addresses.world.owner).post(
        RESEND_API, {"address": address}, format="json"
    )
    assert response.status_code == 400
    assert message in str(error_of(response))


def test_resending_again_soon_is_429_with_retry_after(addresses: Addresses, settings: Any) -> None:
    settings.CHANNEL_CONFIRMATION_RESEND_INTERVAL_S = 300
    ChannelRecipient.objects.filter(pk=addresses.asked.pk).update(
        confirmation_sent_at=timezone.now() - timedelta(seconds=60)
    )
    response = token_client(addresses.world.owner).post(
        RESEND_API, {"address": ASKED}, format="json"
    )
    assert response.status_code == 429
    assert 200 <= int(response["Retry-After"]) <= 240
    assert "less than 5 minutes ago" in error_of(response)["message"]
    page = client_for(addresses.world.owner).post(
        resend_url(addresses, addresses.asked), follow=True
    )
    assert "less than 5 minutes ago" in page.content.decode()
    assert sent_at(addresses.asked) is None


def test_a_second_click_while_it_is_on_its_way_sends_nothing_more(addresses: Addresses) -> None:
    owner = token_client(addresses.world.owner)
    assert owner.post(RESEND_API, {"address": ASKED}, format="json").status_code == 202
    again = owner.post(RESEND_API, {"address": ASKED}, format="json")
    assert again.status_code == 400
    assert "on its way already" in str(error_of(again))


def test_the_page_tells_why_a_confirmation_could_not_be_sent(addresses: Addresses) -> None:
    ChannelRecipient.objects.filter(pk=addresses.asked.pk).update(
        confirmation_sent_at=None, confirmation_error="SMTP server unreachable: refused"
    )
    page = client_for(addresses.world.viewer).get(page_url()).content.decode()
    assert "confirmation not sent: SMTP server unreachable: refused" in page
    assert RecipientState.WAITING in page


def test_the_public_page_of_a_link_needs_no_account(addresses: Addresses) -> None:

    path = urlsplit(recipient_url(addresses.asked)).path
    assert Client().get(path).status_code == 200


def test_two_resends_that_read_the_row_at_once_send_one_confirmation(
    addresses: Addresses, monkeypatch: pytest.MonkeyPatch
) -> None:
    from apps.alerts.services import recipients

    channel = addresses.channel
    stale = recipients.channel_recipient_statuses(channel=channel)
    recipient_confirmation_resend(channel=channel, address=ASKED, now=timezone.now())
    # The second click read the row before the first one claimed it.
    monkeypatch.setattr(recipients, "channel_recipient_statuses", lambda channel: stale)
    with pytest.raises(ValidationError, match="on its way already"):
        recipient_confirmation_resend(channel=channel, address=ASKED, now=timezone.now())
