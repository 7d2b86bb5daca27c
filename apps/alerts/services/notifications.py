"""Services: notifications are written here, one per channel and transition, never twice."""

import uuid
from collections.abc import Iterable
from datetime import datetime, timedelta
from functools import partial

from django.core.exceptions import ValidationError
from django.db import transaction

from apps.alerts.models import (
    AlertRule,
    Channel,
    ChannelKind,
    Incident,
    Notification,
    NotificationEvent,
    NotificationStatus,
)
from apps.alerts.services.payloads import incident_payload, payload_for_channel_test
from apps.teams.accounts import account_rate_take

TESTS_PER_PERIOD = 5
TEST_PERIOD = timedelta(minutes=10)


def message_id_new() -> str:
    return f"msg_{uuid.uuid4().hex}"


def notification_key(*, incident: Incident, event: str, sequence: int, channel: Channel) -> str:
    """The idempotency key: one notification per incident, event, reminder and channel."""
    return f"incident:{incident.pk}:{event}:{sequence}:channel:{channel.pk}"


def _enqueue(ids: list[int]) -> None:
    from apps.alerts.tasks import deliver_notification

    for notification_id in ids:
        deliver_notification.delay(notification_id)


def _enqueue_on_commit(ids: Iterable[int]) -> None:
    ids = list(ids)
    if ids:
        transaction.on_commit(partial(_enqueue, ids))


def notifications_write(
    *, rule: AlertRule, incident: Incident, event: str, now: datetime
) -> list[Notification]:
    """One notification per enabled channel of the rule, sent once the caller commits.

    A key written before (the same transition evaluated twice) writes nothing again.
    """
    sequence = incident.reminders if event == NotificationEvent.REMINDER else 0
    rows = []
    for channel in rule.channels.filter(disabled_at__isnull=True).order_by("pk"):
        message_id = message_id_new()
        rows.append(
            Notification(
                team_id=incident.team_id,
                channel=channel,
                incident=incident,
                event=event,
                key=notification_key(
                    incident=incident, event=event, sequence=sequence, channel=channel
                ),
                message_id=message_id,
                payload=incident_payload(
                    incident=incident, rule=rule, event=event, message_id=message_id, now=now
                ),
                next_attempt_at=now,
                created_at=now,
            )
        )
    if not rows:
        return []
    Notification.objects.bulk_create(rows, ignore_conflicts=True)
    written = list(
        Notification.objects.filter(
            key__in=[row.key for row in rows], message_id__in=[row.message_id for row in rows]
        )
    )
    _enqueue_on_commit(n.pk for n in written)
    return written


def _test_sends_check(channel: Channel, now: datetime) -> None:
    """At most one test waiting per channel, and a few per period: sign-up is open, and a
    test button without a limit would send mail or requests wherever anyone typed."""
    tests = Notification.objects.filter(channel=channel, event=NotificationEvent.TEST)
    if tests.filter(status=NotificationStatus.PENDING).exists():
        raise ValidationError("A test of this channel is still on its way; wait for its result.")
    recent = tests.filter(created_at__gte=now - TEST_PERIOD).count()
    if recent >= TESTS_PER_PERIOD:
        minutes = int(TEST_PERIOD.total_seconds() // 60)
        raise ValidationError(
            f"At most {TESTS_PER_PERIOD} tests of a channel in {minutes} minutes; try again later."
        )


def notification_test_send(*, channel: Channel, now: datetime) -> Notification:
    """A test notification through ``channel``, delivered (and retried) like any other.

    Test e-mails also count against the hourly allowance of the team's account
    (ACCOUNT_EMAIL_TESTS_PER_HOUR), which all its teams share."""
    message_id = message_id_new()
    with transaction.atomic():
        # The channel row's lock: two clicks at once cannot both pass the limit.
        Channel.objects.select_for_update().filter(pk=channel.pk).first()
        _test_sends_check(channel, now)
        if channel.kind == ChannelKind.EMAIL:
            account_rate_take(
                team=channel.team, what="test e-mails", setting="ACCOUNT_EMAIL_TESTS_PER_HOUR"
            )
        notification = Notification.objects.create(
            team_id=channel.team_id,
            channel=channel,
            event=NotificationEvent.TEST,
            key=f"test:{message_id}",
            message_id=message_id,
            payload=payload_for_channel_test(
                team=channel.team, channel_slug=channel.slug, message_id=message_id, now=now
            ),
            next_attempt_at=now,
            created_at=now,
        )
        _enqueue_on_commit([notification.pk])
    return notification
