"""Deliveries to real receivers: one row per attempt, retries with backoff, never twice.

Each attempt is run by hand with a ``now`` past the retry's time, as the worker's
task and its sweep would run it; the receivers are real HTTP and SMTP servers.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

import pytest
from django.core import mail
from django.core.exceptions import ValidationError
from django.core.mail import EmailMultiAlternatives
from django.test import override_settings
from standardwebhooks.webhooks import Webhook

from apps.alerts.models import (
    AttemptOutcome,
    Channel,
    Notification,
    NotificationStatus,
)
from apps.alerts.services.delivery import MAX_ATTEMPTS, RETRY_DELAYS_S, notification_deliver
from apps.alerts.services.evaluation import alerts_evaluate
from apps.alerts.services.notifications import notification_test_send
from apps.pipelines.models import Pipeline
from tests.alerts.receivers import HttpReceiver, Reply
from tests.builders.alerts import (
    NOW,
    confirmed,
    email_channel,
    rule,
    violation,
    webhook_channel,
)
from tests.builders.configuration import make_pipeline, verify_email
from tests.conftest import TeamWorld

LOOPBACK = override_settings(WEBHOOK_ALLOW_PRIVATE_IPS=True)


@contextmanager
def receiving(*replies: Reply) -> Iterator[HttpReceiver]:
    """A receiver answering ``replies`` in turn, the last one from then on."""
    receiver = HttpReceiver().start()
    receiver.script(*replies, *[replies[-1]] * 20)
    try:
        yield receiver
    finally:
        receiver.stop()


LATER = timedelta(days=1)  # past any retry's time


@pytest.fixture
def pipeline(world: TeamWorld) -> Pipeline:
    return make_pipeline(world.team, "rag-chat", budget={"p95": 2500})


def fired(pipeline: Pipeline, *channels: Channel) -> list[Notification]:
    rule(pipeline, list(channels))
    violation(pipeline, observed_ms=3100.0)
    alerts_evaluate(now=NOW)
    return list(Notification.objects.order_by("pk"))


@LOOPBACK
def test_a_receiver_failing_twice_gets_three_attempts_logged_and_one_alert(
    world: TeamWorld, pipeline: Pipeline
) -> None:
    with receiving(Reply(500, b'{"error": "busy"}'), Reply(503), Reply(200)) as script:
        url = script.url()
        hook = webhook_channel(world.team, url=url)
        (notification,) = fired(pipeline, hook)
        results = [notification_deliver(notification_id=notification.pk, now=NOW)]
        results += [
            notification_deliver(notification_id=notification.pk, now=NOW + LATER * n)
            for n in (1, 2, 3)
        ]

    assert [r.outcome for r in results] == ["retry", "retry", "success", ""]
    assert 0.8 * RETRY_DELAYS_S[0] <= (results[0].retry_in_s or 0) <= 1.2 * RETRY_DELAYS_S[0]
    attempts = list(notification.delivery_attempts.order_by("number"))
    assert [(a.number, a.outcome, a.http_status) for a in attempts] == [
        (1, AttemptOutcome.RETRY, 500),
        (2, AttemptOutcome.RETRY, 503),
        (3, AttemptOutcome.SUCCESS, 200),
    ]
    assert all(a.latency_ms is not None and a.latency_ms >= 0 for a in attempts)
    assert attempts[0].response_excerpt == '{"error": "busy"}'
    notification.refresh_from_db()
    assert notification.status == NotificationStatus.DELIVERED
    # One message, sent three times under one id, and signed each time.
    ids = {r.headers["webhook-id"] for r in script.requests}
    assert ids == {notification.message_id}
    assert len(script.requests) == 3
    verifier = Webhook(hook.secret)
    for request in script.requests:
        assert verifier.verify(request.body, request.headers)["type"] == "alert.firing"


@LOOPBACK
def test_the_delivery_task_run_twice_sends_once(world: TeamWorld, pipeline: Pipeline) -> None:
    with receiving(Reply(204)) as script:
        url = script.url()
        (notification,) = fired(pipeline, webhook_channel(world.team, url=url))
        first = notification_deliver(notification_id=notification.pk)
        second = notification_deliver(notification_id=notification.pk)

    assert (first.sent, second.sent) == (True, False)
    assert len(script.requests) == 1
    assert notification.delivery_attempts.count() == 1


@LOOPBACK
def test_a_410_disables_the_channel_and_tells_the_owners(
    world: TeamWorld, pipeline: Pipeline
) -> None:
    verify_email(world.owner)
    with receiving(Reply(410)) as _receiver:
        url = _receiver.url()
        hook = webhook_channel(world.team, url=url)
        (notification,) = fired(pipeline, hook)
        result = notification_deliver(notification_id=notification.pk)

    hook.refresh_from_db()
    assert result.outcome == AttemptOutcome.PERMANENT
    assert not hook.is_enabled
    assert "410" in hook.disabled_reason
    notification.refresh_from_db()
    assert notification.status == NotificationStatus.FAILED
    (owners_mail,) = mail.outbox
    assert owners_mail.to == [world.owner.email]
    assert "oncall-hook" in owners_mail.subject
    assert "410" in owners_mail.body
    assert "/teams/acme/alerts/channels/" in owners_mail.body


@LOOPBACK
def test_owners_whose_address_is_not_verified_are_not_told(
    world: TeamWorld, pipeline: Pipeline
) -> None:
    with receiving(Reply(410)) as _receiver:
        (notification,) = fired(pipeline, webhook_channel(world.team, url=_receiver.url()))
        notification_deliver(notification_id=notification.pk)

    assert not Channel.objects.get(slug="oncall-hook").is_enabled
    assert mail.outbox == []  # anyone may sign up with anyone's address


@LOOPBACK
def test_permanent_failures_in_a_row_disable_the_channel_at_the_limit(
    world: TeamWorld, pipeline: Pipeline, settings: object
) -> None:
    verify_email(world.owner)
    with receiving(Reply(404)) as script:
        url = script.url()
        hook = webhook_channel(world.team, url=url)
        tests_sent, outcomes = [], []
        for _ in range(4):
            tests_sent.append(notification_test_send(channel=hook, now=NOW))
            outcomes.append(notification_deliver(notification_id=tests_sent[-1].pk).outcome)

    hook.refresh_from_db()
    # Three failures disable it; the fourth test waits for nothing and is cancelled.
    assert outcomes == ["permanent", "permanent", "permanent", "cancelled"]
    assert len(script.requests) == 3
    assert not hook.is_enabled
    assert "3 deliveries in a row" in hook.disabled_reason
    assert Notification.objects.get(pk=tests_sent[3].pk).status == NotificationStatus.CANCELLED
    assert len(mail.outbox) == 1


@LOOPBACK
def test_a_success_between_failures_starts_the_count_again(
    world: TeamWorld, pipeline: Pipeline
) -> None:
    with receiving(Reply(404), Reply(404), Reply(204), Reply(404), Reply(404)) as _receiver:
        url = _receiver.url()
        hook = webhook_channel(world.team, url=url)
        for minute in range(5):
            notification = notification_test_send(
                channel=hook, now=NOW + timedelta(minutes=3 * minute)
            )
            notification_deliver(notification_id=notification.pk)

    hook.refresh_from_db()
    assert hook.is_enabled
    assert hook.consecutive_failures == 2


def test_a_private_target_is_refused_without_the_allow_setting(
    world: TeamWorld, pipeline: Pipeline
) -> None:
    with receiving(Reply(204)) as script:
        url = script.url()
        # Saved while the server allowed it; the setting is gone by the time it sends.
        with LOOPBACK:
            hook = webhook_channel(world.team, url=url)
        (notification,) = fired(pipeline, hook)
        result = notification_deliver(notification_id=notification.pk)

    assert result.outcome == AttemptOutcome.PERMANENT
    assert script.requests == []
    attempt = notification.delivery_attempts.get()
    assert "127.0.0.1" in attempt.error
    assert "WEBHOOK_ALLOW_PRIVATE_IPS" in attempt.error


@LOOPBACK
def test_a_receiver_that_never_recovers_is_given_up_after_about_an_hour(
    world: TeamWorld, pipeline: Pipeline
) -> None:
    assert 3000 <= sum(RETRY_DELAYS_S) <= 4500
    with receiving(Reply(503)) as script:
        url = script.url()
        (notification,) = fired(pipeline, webhook_channel(world.team, url=url))
        for n in range(MAX_ATTEMPTS + 2):
            notification_deliver(notification_id=notification.pk, now=NOW + LATER * n)

    notification.refresh_from_db()
    assert notification.status == NotificationStatus.FAILED
    assert notification.attempts == MAX_ATTEMPTS == len(script.requests)


@LOOPBACK
def test_a_channel_whose_delivery_raises_holds_back_no_other_channel_or_team(
    world: TeamWorld, pipeline: Pipeline
) -> None:
    theirs = make_pipeline(world.other_team, "search", budget={"p95": 800})
    with receiving(Reply(204)) as script:
        url = script.url()
        broken = webhook_channel(world.team, "broken", url=url)
        sound = webhook_channel(world.team, "sound", url=url)
        other_team = webhook_channel(world.other_team, "theirs", url=url)
        # A row no form writes: a kind without a transport makes its delivery raise.
        Channel.objects.filter(pk=broken.pk).update(kind="pager")
        rule(pipeline, [broken, sound])
        rule(theirs, [other_team], slug="theirs")
        violation(pipeline, observed_ms=3100.0)
        violation(theirs, observed_ms=900.0)
        alerts_evaluate(now=NOW)
        results = {
            n.channel.slug: notification_deliver(notification_id=n.pk).outcome
            for n in Notification.objects.select_related("channel").order_by("pk")
        }

    assert results == {"broken": "retry", "sound": "success", "theirs": "success"}
    assert len(script.requests) == 2
    failed = Notification.objects.get(channel=broken).delivery_attempts.get()
    assert "KeyError" in failed.error


def test_an_email_notification_reaches_its_addresses_with_the_breakdown(
    world: TeamWorld, pipeline: Pipeline
) -> None:
    verify_email(world.owner)  # the subject names the pipeline for verified accounts only
    channel = confirmed(email_channel(world.team, email_to=["a@example.com"]))
    (notification,) = fired(pipeline, channel)
    notification_deliver(notification_id=notification.pk)

    (message,) = mail.outbox
    assert isinstance(message, EmailMultiAlternatives)
    assert message.to == ["a@example.com"]
    assert message.subject.startswith("[WARNING] rag-chat")
    assert "3.1 s" in message.body
    assert "2.5 s" in message.body
    html, mime = message.alternatives[0]
    assert mime == "text/html"
    assert "Open the dashboard" in str(html)


def test_a_channel_takes_one_test_at_a_time_and_a_few_per_ten_minutes(
    world: TeamWorld, pipeline: Pipeline
) -> None:
    hook = webhook_channel(world.team)
    first = notification_test_send(channel=hook, now=NOW)
    with pytest.raises(ValidationError, match="still on its way"):
        notification_test_send(channel=hook, now=NOW)
    Notification.objects.filter(pk=first.pk).update(status=NotificationStatus.DELIVERED)
    for minute in range(1, 5):
        sent = notification_test_send(channel=hook, now=NOW + timedelta(minutes=minute))
        Notification.objects.filter(pk=sent.pk).update(status=NotificationStatus.FAILED)
    with pytest.raises(ValidationError, match="At most 5 tests"):
        notification_test_send(channel=hook, now=NOW + timedelta(minutes=6))
    # Another channel of the team, and ten minutes later this one, may be tested again.
    notification_test_send(channel=email_channel(world.team), now=NOW + timedelta(minutes=6))
    notification_test_send(channel=hook, now=NOW + timedelta(minutes=11))
