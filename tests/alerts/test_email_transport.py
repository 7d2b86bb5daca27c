"""E-mail deliveries through a real SMTP server (aiosmtpd): what arrives, and what fails."""

import re

import pytest
from pytest_django import Settings

from apps.alerts.models import Channel, ChannelKind, NotificationEvent
from apps.alerts.payload_types import Payload
from apps.alerts.services.channels import channel_create
from apps.alerts.transports import transport_for
from apps.alerts.transports.base import Delivered, TransportError
from apps.alerts.transports.email import EmailTransport, channel_disabled_email
from tests.alerts.receivers import Mail, SmtpReceiver
from tests.builders.alerts import confirmed
from tests.builders.configuration import verify_email
from tests.builders.deliveries import (
    TRACE_IDS,
    burn_rate_payload,
    firing_payload,
    notification_for,
    resolved_payload,
    trial_payload,
)
from tests.conftest import TeamWorld

ONCALL = "oncall@acme.example.com"
LEAD = "lead@acme.example.com"


@pytest.fixture
def channel(world: TeamWorld) -> Channel:
    """Both addresses confirmed, and the team's account verified: the subjects name it."""
    verify_email(world.owner)
    return confirmed(
        channel_create(
            team=world.team, slug="team-mail", kind=ChannelKind.EMAIL, email_to=[ONCALL, LEAD]
        )
    )


def _send(channel: Channel, payload: Payload | None = None, **fields: str) -> Delivered:
    notification = notification_for(channel, payload, **fields)
    return EmailTransport().notify(channel=channel, notification=notification, timestamp=0)


def _failure(channel: Channel) -> TransportError:
    with pytest.raises(TransportError) as failed:
        _send(channel)
    return failed.value


def test_the_registry_gives_the_email_transport(channel: Channel) -> None:
    assert isinstance(transport_for(channel), EmailTransport)


def test_the_alert_arrives_with_subject_text_and_html(
    channel: Channel, smtp_server: SmtpReceiver, settings: Settings
) -> None:
    notification = notification_for(channel)
    delivered = EmailTransport().notify(channel=channel, notification=notification, timestamp=0)
    assert delivered == Delivered()
    # One message per address: each carries its own link to stop.
    assert [m.rcpt_tos for m in smtp_server.messages] == [[ONCALL], [LEAD]]
    mail = smtp_server.messages[0]
    assert mail.mail_from == "budgets@localhost"
    message = mail.message
    assert message["From"] == settings.DEFAULT_FROM_EMAIL
    assert message["To"] == ONCALL
    assert mail.subject == "[CRITICAL] rag-chat · stage retrieval p95 812.4 ms > 500 ms budget"
    assert message["Message-ID"] == f"<{notification.message_id}@localhost>"
    assert message["X-Latency-Budgets-Message-Id"] == notification.message_id
    assert message["Auto-Submitted"] == "auto-generated"
    assert message.get_content_type() == "multipart/alternative"


def test_the_text_part_has_the_breakdown_links_and_why(
    channel: Channel, smtp_server: SmtpReceiver
) -> None:
    _send(channel)
    text = smtp_server.messages[0].part("text/plain")
    assert "p95 812.4 ms over the last 5 min" in text
    assert "Budget:    500 ms" in text
    assert "Over by:   312.4 ms" in text
    retrieval = next(line for line in text.splitlines() if line.strip().startswith("Retrieval"))
    assert retrieval.split() == [
        "Retrieval",
        "p95",
        "812.4",
        "ms",
        "500",
        "ms",
        "312.4",
        "ms",
        "62",
        "%",
    ]
    generation = next(line for line in text.splitlines() if line.strip().startswith("Generation"))
    assert generation.split() == ["Generation", "p95", "1.43", "s", "1.8", "s", "-", "21", "%"]
    for trace_id in TRACE_IDS:
        assert f"/teams/acme/traces/{trace_id}/" in text
    assert (
        "Dashboard: http://localhost:8000/teams/acme/pipelines/rag-chat/stages/retrieval/" in text
    )
    assert "Incident:  http://localhost:8000/teams/acme/alerts/incidents/41/" in text
    assert "channel “team-mail” of the team Acme" in text
    assert "alert rule “Retrieval too slow”" in text
    assert "&" not in text  # a text part is not HTML-escaped


def test_the_html_part_has_the_numbers_inline_styles_and_no_external_resources(
    channel: Channel, smtp_server: SmtpReceiver
) -> None:
    _send(channel)
    html = smtp_server.messages[0].part("text/html")
    for shown in ("812.4 ms", "500 ms", "312.4 ms", "62 %", "1.43 s", "21 %", "Retrieval"):
        assert shown in html
    assert 'href="http://localhost:8000/teams/acme/alerts/incidents/41/"' in html
    assert f'href="http://localhost:8000/teams/acme/traces/{TRACE_IDS[0]}/"' in html
    assert "style=" in html
    for external in ("<img", "<link", "<script", "src=", "url(", "<style"):
        assert external not in html


def test_names_are_escaped_in_html(channel: Channel, smtp_server: SmtpReceiver) -> None:
    _send(channel, firing_payload(pipeline={"slug": "rag-chat", "name": "<b>RAG</b> & co"}))
    mail = smtp_server.messages[0]
    assert "&lt;b&gt;RAG&lt;/b&gt; &amp; co" in mail.part("text/html")
    assert "<b>RAG</b> & co" in mail.part("text/plain")


def test_the_message_id_is_the_same_on_every_attempt(
    channel: Channel, smtp_server: SmtpReceiver
) -> None:
    notification = notification_for(channel)
    for attempt in (1, 2):
        EmailTransport().notify(channel=channel, notification=notification, timestamp=attempt)
    ids = {m.message["Message-ID"] for m in smtp_server.messages}
    assert len(smtp_server.messages) == 4
    assert ids == {f"<{notification.message_id}@localhost>"}


@pytest.mark.parametrize(
    ("payload", "event", "subject"),
    [
        (
            resolved_payload(),
            NotificationEvent.RESOLVED,
            "[RESOLVED] rag-chat · stage retrieval p95 431.2 ms, back under its 500 ms budget "
            "(after 42 min 1 s)",
        ),
        (
            trial_payload(),
            NotificationEvent.TEST,
            "[TEST] rag-chat · stage retrieval p95 812.4 ms > 500 ms budget (example figures)",
        ),
        (
            firing_payload(type="alert.no_data"),
            NotificationEvent.NO_DATA,
            "[NO DATA] rag-chat · stage retrieval p95: too few traces to judge the 500 ms budget",
        ),
        (
            burn_rate_payload(),
            NotificationEvent.FIRING,
            "[CRITICAL] rag-chat · objective burning 16.2x the allowed rate over 1 h and 5 min",
        ),
        (
            firing_payload(type="alert.firing", reminder=3),
            NotificationEvent.REMINDER,
            "[CRITICAL] rag-chat · stage retrieval p95 812.4 ms > 500 ms budget "
            "(still firing, reminder 3)",
        ),
    ],
)
def test_the_subject_says_what_happened(
    channel: Channel, smtp_server: SmtpReceiver, payload: Payload, event: str, subject: str
) -> None:
    _send(channel, payload, event=event)
    assert smtp_server.messages[0].subject == subject


def test_a_test_message_says_nothing_is_wrong(channel: Channel, smtp_server: SmtpReceiver) -> None:
    _send(channel, trial_payload(), event=NotificationEvent.TEST)
    mail = smtp_server.messages[0]
    plain, html = mail.part("text/plain"), mail.part("text/html")
    assert (
        "This is a test of the channel “team-mail”: nothing is wrong. Its figures are "
        "examples, not measurements." in plain
    )
    assert "Observed:  p95 812.4 ms (an example)" in plain
    assert "Its figures are examples, not measurements." in html
    assert "which someone sent a test." in mail.part("text/plain")


def test_a_burn_rate_message_shows_the_rates(channel: Channel, smtp_server: SmtpReceiver) -> None:
    _send(channel, burn_rate_payload())
    text = smtp_server.messages[0].part("text/plain")
    assert "16.2 over 1 h and 20.0 over 5 min (limit 14.4)" in text
    assert "Observed:" not in text


def test_a_resolved_message_says_for_how_long_it_fired(
    channel: Channel, smtp_server: SmtpReceiver
) -> None:
    _send(channel, resolved_payload(), event=NotificationEvent.RESOLVED)
    text = smtp_server.messages[0].part("text/plain")
    assert "Fired for: 42 min" in text
    assert "rag-chat stage retrieval p95 431.2 ms, back under its 500 ms budget." in text
    assert "Budget:    p95 500 ms; p95 431.2 ms when it resolved" in text
    assert "over its" not in text
    assert "Over by" not in text


def test_every_recipient_refused_for_good_is_permanent(
    channel: Channel, smtp_server: SmtpReceiver
) -> None:
    smtp_server.refuse = dict.fromkeys((ONCALL, LEAD), "550 5.1.1 No such user")
    error = _failure(channel)
    assert error.permanent
    assert "550" in str(error)
    assert ONCALL in str(error)
    assert smtp_server.messages == []


def test_recipients_refused_for_now_are_retried(
    channel: Channel, smtp_server: SmtpReceiver
) -> None:
    smtp_server.refuse = dict.fromkeys((ONCALL, LEAD), "451 4.7.1 Greylisted, try again later")
    assert not _failure(channel).permanent


def test_one_refused_recipient_does_not_fail_the_others(
    channel: Channel, smtp_server: SmtpReceiver
) -> None:
    smtp_server.refuse = {LEAD: "550 5.1.1 No such user"}
    delivered = _send(channel)
    assert "Refused" in delivered.note
    assert LEAD in delivered.note
    (mail,) = smtp_server.messages
    assert mail.rcpt_tos == [ONCALL]


def test_a_refused_sender_is_permanent(channel: Channel, smtp_server: SmtpReceiver) -> None:
    smtp_server.sender_reply = "553 5.7.1 Sender address rejected"
    error = _failure(channel)
    assert error.permanent
    assert "553" in str(error)


def test_an_smtp_server_that_is_down_is_retried(channel: Channel, smtp_down: int) -> None:
    error = _failure(channel)
    assert not error.permanent


def _one(smtp_server: SmtpReceiver) -> Mail:
    (mail,) = smtp_server.messages
    return mail


def test_the_owners_are_told_which_channel_was_disabled_and_why(
    world: TeamWorld, smtp_server: SmtpReceiver, settings: Settings
) -> None:
    settings.SITE_URL = "https://budgets.example.com"
    channel = channel_create(
        team=world.team,
        slug="oncall-hook",
        kind=ChannelKind.WEBHOOK,
        url="https://hooks.example.com/x",
    )
    reason = "The receiver answered 410: HTTP 410 Gone"
    channel_disabled_email(channel=channel, recipients=["olivia@example.com"], reason=reason)
    mail = _one(smtp_server)
    assert mail.rcpt_tos == ["olivia@example.com"]
    assert mail.subject == (
        "[Latency Budgets] The alert channel “oncall-hook” of Acme was disabled"
    )
    url = "https://budgets.example.com/teams/acme/alerts/channels/"
    for part in (mail.part("text/plain"), mail.part("text/html")):
        assert reason in part
        assert url in part
        assert "https://hooks.example.com/x" in part
        assert "owner of the team Acme" in part


def test_telling_the_owners_raises_when_mail_cannot_be_sent(
    world: TeamWorld, smtp_down: int
) -> None:
    channel = channel_create(
        team=world.team, slug="m", kind=ChannelKind.EMAIL, email_to=["a@example.com"]
    )
    with pytest.raises(TransportError):
        channel_disabled_email(channel=channel, recipients=["olivia@example.com"], reason="x")


@pytest.mark.parametrize(
    ("payload", "event", "subject"),
    [
        (
            firing_payload(),
            NotificationEvent.FIRING,
            "[CRITICAL] Latency alert #41 · p95 812.4 ms > 500 ms budget",
        ),
        (
            trial_payload(),
            NotificationEvent.TEST,
            "[TEST] Latency alert test · p95 812.4 ms > 500 ms budget (example figures)",
        ),
        (
            resolved_payload(),
            NotificationEvent.RESOLVED,
            "[RESOLVED] Latency alert #41 · p95 431.2 ms, back under its 500 ms budget "
            "(after 42 min 1 s)",
        ),
    ],
)
def test_a_subject_from_an_unverified_account_carries_none_of_its_names(
    world: TeamWorld, smtp_server: SmtpReceiver, payload: Payload, event: str, subject: str
) -> None:
    channel = confirmed(
        channel_create(
            team=world.team,
            slug="team-mail",
            name="Pager",
            kind=ChannelKind.EMAIL,
            email_to=[ONCALL],
        )
    )
    _send(channel, payload, event=event)
    sent = smtp_server.messages[0].subject
    assert sent == subject
    for chosen in (
        "rag-chat",
        "RAG",
        "retrieval",
        "Retrieval",
        "Acme",
        "acme",
        "team-mail",
        "Pager",
    ):
        assert chosen not in sent


def test_a_subject_from_a_verified_account_names_its_pipeline_and_stage(
    world: TeamWorld, smtp_server: SmtpReceiver
) -> None:
    verify_email(world.owner)
    channel = confirmed(
        channel_create(team=world.team, slug="team-mail", kind=ChannelKind.EMAIL, email_to=[ONCALL])
    )
    _send(channel)
    assert smtp_server.messages[0].subject.startswith("[CRITICAL] rag-chat · stage retrieval")


def test_every_alert_email_carries_its_recipients_own_stop_link(
    channel: Channel, smtp_server: SmtpReceiver
) -> None:
    _send(channel)
    links = []
    for mail in smtp_server.messages:
        text = mail.part("text/plain")
        (link,) = re.findall(r"Stop receiving this channel's e-mails: (\S+)", text)
        assert link in mail.part("text/html")
        assert mail.message["List-Unsubscribe"].strip() == f"<{link}unsubscribe/>"
        links.append(link)
    assert len(set(links)) == 2


def test_addresses_left_out_are_named_in_the_note(
    world: TeamWorld, smtp_server: SmtpReceiver
) -> None:
    channel = confirmed(
        channel_create(
            team=world.team, slug="team-mail", kind=ChannelKind.EMAIL, email_to=[ONCALL, LEAD]
        ),
        ONCALL,
    )
    delivered = _send(channel)
    assert delivered.note == f"Not sent to {LEAD} (waiting for confirmation)."
    assert [m.rcpt_tos for m in smtp_server.messages] == [[ONCALL]]
