"""Mail only to people who asked for it: every address of an e-mail channel gets a
confirmation first, and nothing else until it confirms by a POST; a verified member's
address receives at once; a decline, or the stop link of any alert, ends it.

Through a real SMTP server (aiosmtpd). The worker's tasks run in this process (eager)
once the change that sets them off commits, as the worker would run them.
"""

import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.test import Client
from django.utils import timezone

from apps.alerts.models import (
    AttemptOutcome,
    Channel,
    ChannelKind,
    ChannelRecipient,
    Notification,
    NotificationStatus,
    RecipientState,
)
from apps.alerts.services.channels import channel_create, channel_delete, channel_update
from apps.alerts.services.delivery import notification_deliver
from apps.alerts.services.evaluation import alerts_evaluate
from apps.alerts.services.notifications import notification_test_send
from apps.alerts.services.recipients import (
    recipient_confirmation_resend,
    recipient_confirmations_send,
)
from apps.pipelines.config_as_code import ConfigApplyError, config_apply, parse_document
from apps.pipelines.models import Pipeline
from tests.alerts.conftest import smtp_settings
from tests.alerts.receivers import Mail, SmtpReceiver
from tests.builders.alerts import NOW, rule, violation
from tests.builders.api import token_client
from tests.builders.configuration import make_pipeline, make_team, verify_email
from tests.conftest import TeamWorld, client_for

STRANGER = "someone@elsewhere.example.com"
LINK = re.compile(r"https?://[^/\s\"]+(/alerts/recipients/[^/\s\"]+/)")

Commit = Callable[..., Any]


@pytest.fixture(autouse=True)
def _tasks_in_process(eager: None, clean_cache: None) -> None:
    """The worker's tasks run here; the account allowances start from nothing."""


@pytest.fixture
def pipeline(world: TeamWorld) -> Pipeline:
    return make_pipeline(world.team, "rag-chat", budget={"p95": 2500})


@pytest.fixture
def committed(django_capture_on_commit_callbacks: Commit) -> Callable[..., Any]:
    """Run ``make(...)`` as a request would: what it sets off after commit runs too."""

    def run(make: Callable[..., Any], **kwargs: Any) -> Any:
        with django_capture_on_commit_callbacks(execute=True):
            return make(**kwargs)

    return run


def mail_channel(committed: Callable[..., Any], world: TeamWorld, *addresses: str) -> Channel:
    channel: Channel = committed(
        channel_create,
        team=world.team,
        slug="team-mail",
        name="Acme on-call",
        kind=ChannelKind.EMAIL,
        email_to=list(addresses),
    )
    return channel


def link_in(mail: Mail) -> str:
    (path,) = set(LINK.findall(mail.part("text/plain")))
    return path


def to(smtp: SmtpReceiver, address: str) -> list[Mail]:
    return [m for m in smtp.messages if m.rcpt_tos == [address]]


def alert_through(pipeline: Pipeline, channel: Channel) -> Notification:
    """The channel's rule fires, and its notification is delivered once."""
    rule(pipeline, [channel])
    violation(pipeline, observed_ms=3100.0)
    alerts_evaluate(now=NOW)
    notification = Notification.objects.get(channel=channel, event="firing")
    notification_deliver(notification_id=notification.pk, now=NOW)
    notification.refresh_from_db()
    return notification


def sent_a_test(channel: Channel) -> Notification:
    notification = notification_test_send(channel=channel, now=timezone.now())
    notification_deliver(notification_id=notification.pk)
    notification.refresh_from_db()
    return notification


def state_of(address: str) -> str:
    return ChannelRecipient.objects.get(email=address).state


@pytest.fixture
def waiting(world: TeamWorld, smtp_server: SmtpReceiver, committed: Callable[..., Any]) -> Channel:
    """A channel whose one address was just asked to confirm."""
    return mail_channel(committed, world, STRANGER)


def test_an_unconfirmed_address_receives_only_the_confirmation(
    waiting: Channel, smtp_server: SmtpReceiver, pipeline: Pipeline
) -> None:
    alert = alert_through(pipeline, waiting)
    test = sent_a_test(waiting)

    (confirmation,) = smtp_server.messages
    assert confirmation.rcpt_tos == [STRANGER]
    assert "Confirm" in confirmation.subject
    for notification in (alert, test):
        assert notification.status == NotificationStatus.CANCELLED
        assert f"{STRANGER} (waiting for confirmation)" in notification.last_error
        (attempt,) = notification.delivery_attempts.all()
        assert attempt.outcome == AttemptOutcome.SKIPPED
        assert STRANGER in attempt.note
    # Nobody to tell is no failure of the channel.
    waiting.refresh_from_db()
    assert (waiting.is_enabled, waiting.consecutive_failures) == (True, 0)


def test_after_confirming_by_post_the_address_receives_the_next_alert(
    waiting: Channel, smtp_server: SmtpReceiver, pipeline: Pipeline
) -> None:
    path = link_in(smtp_server.messages[0])
    page = Client().get(path)  # what a mail scanner following the link does
    assert page.status_code == 200
    assert "Yes, send me these alerts" in page.content.decode()
    assert state_of(STRANGER) == RecipientState.WAITING

    assert Client().post(path, {"answer": "confirm"}).status_code == 302
    assert state_of(STRANGER) == RecipientState.CONFIRMED

    alert = alert_through(pipeline, waiting)
    assert alert.status == NotificationStatus.DELIVERED
    _confirmation, received = to(smtp_server, STRANGER)
    assert received.subject.startswith("[WARNING]")
    assert "3.1 s" in received.part("text/plain")


def test_a_declined_address_receives_nothing_more(
    waiting: Channel, smtp_server: SmtpReceiver, pipeline: Pipeline, world: TeamWorld
) -> None:
    path = link_in(smtp_server.messages[0])
    Client().post(path, {"answer": "decline"})
    assert state_of(STRANGER) == RecipientState.DECLINED

    assert alert_through(pipeline, waiting).status == NotificationStatus.CANCELLED
    assert "(declined)" in sent_a_test(waiting).last_error
    with pytest.raises(Exception, match="declined this channel"):
        recipient_confirmation_resend(channel=waiting, address=STRANGER, now=timezone.now())
    # Nor by deleting the channel and making it anew, in this team or another of its account.
    channel_delete(channel=waiting)
    again = channel_create(
        team=make_team("acme-two", owner=world.owner),
        slug="again",
        kind=ChannelKind.EMAIL,
        email_to=[STRANGER.upper()],
    )
    assert ChannelRecipient.objects.get(channel=again).state == RecipientState.DECLINED
    assert recipient_confirmations_send(now=timezone.now() + timedelta(hours=1)) == 0
    assert len(smtp_server.messages) == 1


def test_a_verified_members_address_receives_alerts_at_once(
    world: TeamWorld, smtp_server: SmtpReceiver, committed: Callable[..., Any], pipeline: Pipeline
) -> None:
    verify_email(world.editor)
    channel = mail_channel(committed, world, world.editor.email, world.viewer.email)

    # The viewer's address is not verified: it is asked like anyone else's.
    (confirmation,) = smtp_server.messages
    assert confirmation.rcpt_tos == [world.viewer.email]
    alert_through(pipeline, channel)
    (alert,) = to(smtp_server, world.editor.email)
    assert alert.subject.startswith("[WARNING]")
    assert to(smtp_server, world.viewer.email) == [confirmation]


def test_a_member_who_is_not_verified_is_asked_like_anyone(
    world: TeamWorld, smtp_server: SmtpReceiver, committed: Callable[..., Any]
) -> None:
    mail_channel(committed, world, world.owner.email)
    (confirmation,) = smtp_server.messages
    assert confirmation.rcpt_tos == [world.owner.email]


def test_the_stop_link_in_an_alert_stops_the_channels_mail(
    world: TeamWorld, smtp_server: SmtpReceiver, committed: Callable[..., Any], pipeline: Pipeline
) -> None:
    channel = mail_channel(committed, world, verify_email(world.editor).email)
    alert_through(pipeline, channel)
    (alert,) = smtp_server.messages
    path = link_in(alert)
    assert path in alert.part("text/html")
    page = Client().get(path).content.decode()
    assert "Stop these e-mails" in page

    Client().post(path, {"answer": "decline"})

    assert sent_a_test(channel).status == NotificationStatus.CANCELLED
    assert len(smtp_server.messages) == 1
    # A decline beats being a verified member: the person said no.
    assert "(declined)" in Notification.objects.get(event="test").last_error


def test_the_mail_clients_one_click_unsubscribe_stops_it_too(
    world: TeamWorld, smtp_server: SmtpReceiver, committed: Callable[..., Any]
) -> None:
    channel = mail_channel(committed, world, verify_email(world.editor).email)
    sent_a_test(channel)
    (mail,) = smtp_server.messages
    assert mail.message["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    url = str(mail.message["List-Unsubscribe"]).strip().strip("<>")

    # RFC 8058: the client posts without a page, a cookie or a CSRF token.
    response = Client(enforce_csrf_checks=True).post(
        urlsplit(url).path, {"List-Unsubscribe": "One-Click"}
    )

    assert response.status_code == 200
    assert state_of(world.editor.email) == RecipientState.DECLINED
    assert Client().get(urlsplit(url).path).status_code == 405  # a GET changes nothing


def test_opening_the_links_changes_nothing(waiting: Channel, smtp_server: SmtpReceiver) -> None:
    path = link_in(smtp_server.messages[0])
    for _ in range(3):
        Client().get(path)
        Client().head(path)
    assert state_of(STRANGER) == RecipientState.WAITING


def test_an_old_link_still_declines_but_no_longer_confirms(
    waiting: Channel, smtp_server: SmtpReceiver, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = link_in(smtp_server.messages[0])
    settings.CHANNEL_CONFIRMATION_EXPIRY_DAYS = 1
    import time

    later = time.time() + 2 * 86400
    monkeypatch.setattr(time, "time", lambda: later)
    page = Client().get(path).content.decode()
    assert "too old to confirm" in page
    assert "Yes, send me these alerts" not in page
    Client().post(path, {"answer": "confirm"})
    assert state_of(STRANGER) == RecipientState.WAITING
    Client().post(path, {"answer": "decline"})
    assert state_of(STRANGER) == RecipientState.DECLINED


def test_a_forged_link_is_404(db: None) -> None:
    assert Client().get("/alerts/recipients/1/").status_code == 404
    assert Client().post("/alerts/recipients/1/unsubscribe/").status_code == 404


def test_an_unverified_accounts_confirmation_names_nothing_the_team_chose(
    waiting: Channel, smtp_server: SmtpReceiver
) -> None:
    (mail,) = smtp_server.messages
    assert (
        mail.subject == "[Latency Budgets] Confirm that you want latency alerts from localhost:8000"
    )
    texts = (mail.subject, mail.part("text/plain"), mail.part("text/html"))
    for text in texts:
        for chosen in ("Acme", "acme", "team-mail", "on-call", "olivia"):
            assert chosen not in text.replace("alerts/recipients", "")
    assert "Someone asked to send latency alerts from Latency Budgets (localhost:8000)" in texts[1]
    assert "did not ask for this" in texts[1]
    # Nor the page behind the link.
    page = Client().get(link_in(mail)).content.decode()
    assert "Acme" not in page
    assert "on-call" not in page


def test_a_verified_accounts_confirmation_names_its_team_and_channel(
    world: TeamWorld, smtp_server: SmtpReceiver, committed: Callable[..., Any]
) -> None:
    verify_email(world.owner)
    mail_channel(committed, world, STRANGER)
    (mail,) = smtp_server.messages
    assert mail.subject == "[Latency Budgets] Confirm alerts from Acme"
    assert "its channel “Acme on-call”" in mail.part("text/plain")


def test_an_address_added_later_is_asked_and_a_removed_one_forgotten(
    waiting: Channel, smtp_server: SmtpReceiver, committed: Callable[..., Any]
) -> None:
    committed(channel_update, channel=waiting, email_to=["new@elsewhere.example.com"])
    assert [m.rcpt_tos for m in smtp_server.messages] == [
        [STRANGER],
        ["new@elsewhere.example.com"],
    ]
    assert list(ChannelRecipient.objects.values_list("email", flat=True)) == [
        "new@elsewhere.example.com"
    ]


def test_a_configuration_file_asks_its_addresses_once_it_is_applied(
    world: TeamWorld, smtp_server: SmtpReceiver, committed: Callable[..., Any]
) -> None:
    text = (
        "team: acme\nchannels:\n  - slug: sre\n    kind: email\n"
        f"    to: [{STRANGER}, {world.viewer.email}]\n"
    )
    committed(config_apply, document=parse_document(text), dry_run=True)
    assert smtp_server.messages == []  # a preview mails nobody

    committed(config_apply, document=parse_document(text))

    assert sorted(m.rcpt_tos[0] for m in smtp_server.messages) == sorted(
        [STRANGER, world.viewer.email]
    )


def test_an_apply_that_fails_mails_nobody(
    world: TeamWorld, smtp_server: SmtpReceiver, committed: Callable[..., Any]
) -> None:
    # The second channel's name holds a NUL, which PostgreSQL refuses once the first is made.
    text = (
        "team: acme\nchannels:\n  - slug: sre\n    kind: email\n    to: [a@example.com]\n"
        '  - slug: ops\n    name: "a\\0b"\n    kind: email\n    to: [b@example.com]\n'
    )
    with pytest.raises(ConfigApplyError):
        committed(config_apply, document=parse_document(text))
    assert smtp_server.messages == []
    assert not ChannelRecipient.objects.exists()


def test_a_confirmation_that_cannot_be_sent_is_retried_by_the_sweep(
    world: TeamWorld, smtp_down: int, committed: Callable[..., Any], settings: Any
) -> None:
    channel = mail_channel(committed, world, STRANGER)
    recipient = ChannelRecipient.objects.get()
    assert recipient.confirmation_error  # the task ran and failed
    assert recipient.confirmation_due_at is not None
    assert recipient.confirmation_failures == 1

    smtp = SmtpReceiver().start()
    try:
        smtp_settings(settings, smtp.port)
        sent = recipient_confirmations_send(now=timezone.now() + timedelta(minutes=5))
    finally:
        smtp.stop()
    assert sent == 1
    assert [m.rcpt_tos for m in smtp.messages] == [[STRANGER]]
    recipient.refresh_from_db()
    assert (recipient.confirmation_error, recipient.confirmation_due_at) == ("", None)
    assert channel.recipients.get().confirmation_sent_at is not None


@pytest.mark.parametrize("door", ["form", "api"])
def test_every_door_asks_the_addresses_once_the_change_commits(
    world: TeamWorld, smtp_server: SmtpReceiver, door: str, committed: Callable[..., Any]
) -> None:
    if door == "form":
        response = committed(
            client_for(world.editor).post,
            path="/teams/acme/alerts/channels/new/email/",
            data={"slug": "sre", "addresses": STRANGER},
        )
        assert response.status_code == 302
    else:
        response = committed(
            token_client(world.editor).post,
            path="/api/v1/channels/",
            data={"slug": "sre", "kind": "email", "email_to": [STRANGER]},
            format="json",
        )
        assert response.status_code == 201
        assert response.json()["recipients"][0]["state"] == "waiting"
    (confirmation,) = smtp_server.messages
    assert confirmation.rcpt_tos == [STRANGER]
    assert state_of(STRANGER) == RecipientState.WAITING
