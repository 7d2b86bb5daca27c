"""Ten teams of one account share that account's channels, test e-mails, confirmation
e-mails and invitations: a cap counted per team would multiply with every team anyone
can create. Another account is never affected."""

from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from apps.alerts.models import Channel, ChannelKind, ChannelRecipient, Notification
from apps.alerts.services.channels import channel_create
from apps.alerts.services.notifications import notification_test_send
from apps.pipelines.config_as_code import ConfigApplyError, config_apply, parse_document
from apps.teams.models import Team
from apps.teams.ratelimit import RateExceeded
from tests.builders.alerts import email_channel, webhook_channel
from tests.builders.api import error_of, token_client
from tests.builders.configuration import make_team
from tests.conftest import TeamWorld, client_for
from tests.teams.invitations import invite

CHANNELS = "/api/v1/channels/"


@pytest.fixture(autouse=True)
def _fresh_allowances(clean_cache: None) -> None:
    """Hourly allowances are counted in the cache: each test starts from none."""


@pytest.fixture
def ten_teams(world: TeamWorld, settings: Any) -> list[Team]:
    """acme and nine more teams, all created by olivia: one account."""
    settings.ACCOUNT_MAX_TEAMS = 11
    return [world.team] + [make_team(f"acme-{n}", owner=world.owner) for n in range(2, 11)]


def addresses(team: Team, count: int) -> list[str]:
    return [f"a{n}@{team.slug}.example.com" for n in range(count)]


def test_the_accounts_eleventh_channel_is_refused_even_on_a_new_team(
    world: TeamWorld, ten_teams: list[Team], settings: Any
) -> None:
    settings.ACCOUNT_MAX_CHANNELS = 10
    for team in ten_teams:
        webhook_channel(team)
    eleventh = make_team("acme-11", owner=world.owner)

    with pytest.raises(ValidationError) as refused:
        webhook_channel(eleventh)
    assert "already hold 10 alert channels" in str(refused.value)
    assert "ACCOUNT_MAX_CHANNELS=10" in str(refused.value)

    # Through every door: the API, the form and a configuration file.
    api = token_client(world.owner).post(
        f"{CHANNELS}?team=acme-11",
        {"slug": "hook", "kind": "webhook", "url": "https://hooks.example.com/x"},
        format="json",
    )
    assert api.status_code == 400
    assert "ACCOUNT_MAX_CHANNELS" in str(error_of(api))
    form = client_for(world.owner).post(
        "/teams/acme-11/alerts/channels/new/webhook/",
        {"slug": "hook", "url": "https://hooks.example.com/x", "format": "native"},
    )
    assert form.status_code == 422
    assert "ACCOUNT_MAX_CHANNELS=10" in form.content.decode()
    text = "team: acme-11\nchannels:\n  - slug: hook\n    kind: webhook\n    url: https://x.io/h\n"
    with pytest.raises(ConfigApplyError, match="ACCOUNT_MAX_CHANNELS=10"):
        config_apply(document=parse_document(text))
    assert not Channel.objects.filter(team=eleventh).exists()

    # Another account is not affected.
    webhook_channel(world.other_team)


def test_a_deleted_channel_makes_room_again(world: TeamWorld, settings: Any) -> None:
    settings.ACCOUNT_MAX_CHANNELS = 1
    first = webhook_channel(world.team)
    with pytest.raises(ValidationError):
        webhook_channel(world.team, slug="second")
    first.delete()
    webhook_channel(world.team, slug="second")


def test_the_teams_share_the_accounts_test_emails(
    world: TeamWorld, ten_teams: list[Team], settings: Any
) -> None:
    settings.ACCOUNT_EMAIL_TESTS_PER_HOUR = 10
    channels = [email_channel(team) for team in ten_teams]
    for channel in channels:
        notification_test_send(channel=channel, now=timezone.now())
    extra = email_channel(ten_teams[3], slug="second-mail")

    with pytest.raises(RateExceeded, match="ACCOUNT_EMAIL_TESTS_PER_HOUR=10"):
        notification_test_send(channel=extra, now=timezone.now())
    api = token_client(world.owner).post(f"{CHANNELS}second-mail/test?team=acme-4")
    assert api.status_code == 429
    assert 0 < int(api["Retry-After"]) <= 3600
    assert "test e-mails" in error_of(api)["message"]
    assert Notification.objects.filter(channel=extra).count() == 0

    # Webhooks are not mail; another account's e-mail channels are not this account's.
    notification_test_send(channel=webhook_channel(world.team), now=timezone.now())
    notification_test_send(channel=email_channel(world.other_team), now=timezone.now())


def test_the_teams_share_the_accounts_confirmation_emails(
    world: TeamWorld, ten_teams: list[Team], settings: Any
) -> None:
    settings.ACCOUNT_CONFIRMATIONS_PER_HOUR = 20
    for team in ten_teams[:9]:
        channel_create(team=team, slug="mail", kind=ChannelKind.EMAIL, email_to=addresses(team, 2))
    last = ten_teams[9]

    # Three addresses when two are left: refused whole, and nothing spent.
    with pytest.raises(RateExceeded, match="have 2 left; this needs 3"):
        channel_create(team=last, slug="mail", kind=ChannelKind.EMAIL, email_to=addresses(last, 3))
    assert not Channel.objects.filter(team=last).exists()
    api = token_client(world.owner).post(
        f"{CHANNELS}?team={last.slug}",
        {"slug": "mail", "kind": "email", "email_to": addresses(last, 3)},
        format="json",
    )
    assert api.status_code == 429
    assert "ACCOUNT_CONFIRMATIONS_PER_HOUR=20" in error_of(api)["message"]
    form = client_for(world.owner).post(
        f"/teams/{last.slug}/alerts/channels/new/email/",
        {"slug": "mail", "addresses": "\n".join(addresses(last, 3))},
    )
    assert form.status_code == 422
    assert "ACCOUNT_CONFIRMATIONS_PER_HOUR=20" in form.content.decode()
    text = (
        f"team: {last.slug}\nchannels:\n  - slug: mail\n    kind: email\n"
        "    to: [a@x.io, b@x.io, c@x.io]\n"
    )
    with pytest.raises(ConfigApplyError, match="ACCOUNT_CONFIRMATIONS_PER_HOUR=20"):
        config_apply(document=parse_document(text))

    # The refusals spent nothing: the two left are still there to take.
    channel_create(team=last, slug="mail", kind=ChannelKind.EMAIL, email_to=addresses(last, 2))
    assert ChannelRecipient.objects.filter(team__in=ten_teams).count() == 20
    channel_create(
        team=world.other_team, slug="mail", kind=ChannelKind.EMAIL, email_to=["x@globex.io"]
    )


def test_the_teams_share_the_accounts_invitations(
    world: TeamWorld, ten_teams: list[Team], settings: Any
) -> None:
    settings.ACCOUNT_INVITATIONS_PER_HOUR = 10
    for team in ten_teams:
        invite(team, f"new@{team.slug}.example.com", by=world.owner)

    response = client_for(world.owner).post(
        "/teams/acme-5/members/", {"email": "one-more@example.com", "role": "viewer"}
    )
    assert "ACCOUNT_INVITATIONS_PER_HOUR=10" in response.content.decode()
    invite(world.other_team, "new@globex.example.com", by=world.outsider)
