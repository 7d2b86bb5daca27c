"""Services: a notification is sent, each try logged as an attempt, retried with backoff.

A delivery claims its notification with a conditional update (pending, due, and no
live lease), so two runs of the same task never both send; the attempt row is
committed before the transport is called, and completed after. A worker that dies
mid-send leaves the lease to expire, and the next run sends again under the same
``webhook-id`` for the receiver to recognise. A worker that sent but cannot write the
outcome (the database away or refusing writes) keeps trying while its lease holds.
"""

import logging
import random
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.db.models import F, Q, QuerySet, Subquery, Window
from django.db.models.functions import RowNumber
from django.utils import timezone

from apps.alerts.models import (
    AttemptOutcome,
    Channel,
    DeliveryAttempt,
    Notification,
    NotificationStatus,
)
from apps.alerts.services.channels import channel_disable
from apps.alerts.transports import transport_for
from apps.alerts.transports.base import Delivered, NobodyToTell, TransportError
from apps.core.isolation import failure_reason, is_transient
from apps.teams.selectors import verified_member_emails

logger = logging.getLogger(__name__)

# Waits before the 2nd, 3rd, … attempt: ten tries over about an hour.
RETRY_DELAYS_S = (5, 15, 30, 60, 120, 300, 600, 900, 1500)
MAX_ATTEMPTS = len(RETRY_DELAYS_S) + 1
JITTER = 0.2
# Longer than a send can take (the total webhook timeout, an SMTP exchange).
LEASE = timedelta(seconds=120)
# An outcome not yet written is retried until this long before the lease ends, so that
# no other run can claim the notification meanwhile and send it again.
FINISH_MARGIN = timedelta(seconds=15)
# A delivery deferred because its team has its share in flight is asked again after this.
BUSY_RETRY_S = 3.0
ERROR_CHARS = 1000
EXCERPT_CHARS = 1000


@dataclass(frozen=True)
class DeliveryResult:
    notification_id: int
    sent: bool = False
    outcome: str = ""
    retry_in_s: float | None = None


def retry_delay(attempt: int) -> float:
    """Seconds to wait after failed attempt ``attempt`` (1-based), jittered by ±20 %."""
    base = RETRY_DELAYS_S[min(attempt, len(RETRY_DELAYS_S)) - 1]
    return base * random.uniform(1 - JITTER, 1 + JITTER)


def _unheld_due(*, now: datetime, due_by: datetime) -> QuerySet[Notification]:
    """Pending notifications due by ``due_by`` whose lease, if any, ended before ``now``."""
    return Notification.objects.filter(
        Q(lease_until__isnull=True) | Q(lease_until__lt=now),
        status=NotificationStatus.PENDING,
        next_attempt_at__lte=due_by,
    )


def _team_busy(notification_id: int, now: datetime) -> bool:
    """Whether the notification's team already has its share of deliveries in flight.

    A team whose receivers are slow (each send may take the whole webhook timeout)
    would otherwise hold every worker of the alerts queue while other teams' alerts
    wait. Two deliveries claimed at the same instant may both pass: the share is
    exceeded by the number of workers at most, never held by one team alone for long.
    """
    cap = settings.ALERT_DELIVERIES_PER_TEAM
    if cap <= 0:
        return False
    # One statement: the team is read in a subquery (none for a notification gone, so
    # nothing is in flight), and the count stops at the cap.
    team = Notification.objects.filter(pk=notification_id).values("team_id")
    in_flight = Notification.objects.filter(
        team_id=Subquery(team), status=NotificationStatus.PENDING, lease_until__gte=now
    ).exclude(pk=notification_id)
    return in_flight[:cap].count() >= cap


def _claim(notification_id: int, now: datetime) -> bool:
    claimed = (
        _unheld_due(now=now, due_by=now)
        .filter(pk=notification_id)
        .update(lease_until=now + LEASE, attempts=F("attempts") + 1)
    )
    return claimed == 1


def _owners_emails(channel: Channel) -> list[str]:
    """The owners who showed they read their address: anyone may sign up with anyone's."""
    return sorted(verified_member_emails(team=channel.team, owners_only=True))


def _channel_failed(channel: Channel, error: TransportError) -> None:
    """Count a permanent failure; disable the channel at the limit, or at once on 410."""
    Channel.objects.filter(pk=channel.pk).update(consecutive_failures=F("consecutive_failures") + 1)
    channel.refresh_from_db(fields=["consecutive_failures"])
    limit = settings.ALERT_CHANNEL_DISABLE_AFTER
    if error.disable:
        reason = f"The receiver answered {error.http_status or 'that it is gone'}: {error}"
    elif channel.consecutive_failures >= limit:
        reason = (
            f"{channel.consecutive_failures} deliveries in a row failed permanently; "
            f"the last: {error}"
        )
    else:
        return
    if channel_disable(channel=channel, reason=reason):
        from apps.alerts.transports.email import channel_disabled_email

        recipients = _owners_emails(channel)
        if recipients:
            try:
                channel_disabled_email(channel=channel, recipients=recipients, reason=reason)
            except Exception as exc:  # the channel stays disabled; the page says so
                logger.warning("could not tell the owners of channel %s: %s", channel.pk, exc)


def _finish(
    notification: Notification,
    attempt: DeliveryAttempt,
    *,
    outcome: str,
    latency_ms: float,
    http_status: int | None,
    excerpt: str,
    error: str,
    note: str,
    now: datetime,
) -> float | None:
    attempt.outcome = outcome
    attempt.http_status = http_status
    attempt.latency_ms = latency_ms
    attempt.error = error[:ERROR_CHARS]
    attempt.response_excerpt = excerpt[:EXCERPT_CHARS]
    attempt.note = note[:ERROR_CHARS]
    attempt.save(
        update_fields=["outcome", "http_status", "latency_ms", "error", "response_excerpt", "note"]
    )
    retry_in: float | None = None
    fields: dict[str, object] = {"lease_until": None, "last_error": error[:ERROR_CHARS]}
    if outcome == AttemptOutcome.SUCCESS:
        fields.update(status=NotificationStatus.DELIVERED, finished_at=now)
    elif outcome == AttemptOutcome.SKIPPED:
        # Nobody to tell is no failure of the channel: the history says why.
        fields.update(
            status=NotificationStatus.CANCELLED, finished_at=now, last_error=note[:ERROR_CHARS]
        )
    elif outcome == AttemptOutcome.RETRY and notification.attempts < MAX_ATTEMPTS:
        retry_in = retry_delay(notification.attempts)
        fields["next_attempt_at"] = now + timedelta(seconds=retry_in)
    else:
        fields.update(status=NotificationStatus.FAILED, finished_at=now)
    # Only while it is still ours: a channel disabled meanwhile cancelled it.
    Notification.objects.filter(pk=notification.pk, status=NotificationStatus.PENDING).update(
        **fields
    )
    return retry_in


def _finish_recorded(
    notification: Notification, attempt: DeliveryAttempt, *, claimed: float, **outcome: Any
) -> float | None:
    """``_finish``, tried again while the database is away or refusing writes.

    The send has happened: given up, the lease would end and another run send it again.
    Inside a transaction (eager tasks in tests) a failed statement cannot be retried.
    """
    deadline = claimed + (LEASE - FINISH_MARGIN).total_seconds()
    pause = 0.5
    while True:
        try:
            return _finish(notification, attempt, **outcome)
        except DatabaseError as exc:
            if not is_transient(exc) or connection.in_atomic_block:
                raise
            if time.monotonic() + pause > deadline:
                raise
            logger.warning(
                "delivery %s: outcome not written yet, trying again: %s",
                notification.pk,
                failure_reason(exc),
            )
        time.sleep(pause)
        pause = min(pause * 2, 5.0)
        connection.close_if_unusable_or_obsolete()  # a lost connection is opened again


def notification_deliver(*, notification_id: int, now: datetime | None = None) -> DeliveryResult:
    """One attempt at sending the notification, if it is due and nobody else is at it."""
    now = now or timezone.now()
    if _team_busy(notification_id, now):
        # Not claimed: asked again shortly, while the worker serves other teams.
        return DeliveryResult(notification_id, outcome="deferred", retry_in_s=_busy_delay())
    if not _claim(notification_id, now):
        return DeliveryResult(notification_id)
    claimed = time.monotonic()
    notification = Notification.objects.select_related("channel__team").get(pk=notification_id)
    channel = notification.channel
    if not channel.is_enabled:
        Notification.objects.filter(pk=notification.pk).update(
            status=NotificationStatus.CANCELLED,
            finished_at=now,
            lease_until=None,
            last_error="The channel is disabled.",
        )
        return DeliveryResult(notification_id, outcome="cancelled")
    with transaction.atomic():
        attempt = DeliveryAttempt.objects.create(
            notification=notification, number=notification.attempts, started_at=now
        )
    started = time.monotonic()
    http_status, excerpt, error, note = None, "", "", ""
    failure: TransportError | None = None
    try:
        delivered: Delivered = transport_for(channel).notify(
            channel=channel, notification=notification, timestamp=int(time.time())
        )
        outcome, http_status = AttemptOutcome.SUCCESS, delivered.http_status
        excerpt, note = delivered.excerpt, delivered.note
    except NobodyToTell as exc:
        outcome, note = AttemptOutcome.SKIPPED, str(exc)
    except TransportError as exc:
        outcome = AttemptOutcome.PERMANENT if exc.permanent else AttemptOutcome.RETRY
        http_status, excerpt, error = exc.http_status, exc.excerpt, str(exc)
        failure = exc
    except Exception as exc:
        # A bug of ours or a library's, for this one channel: logged, retried, isolated.
        logger.exception("delivery %s through channel %s raised", notification.pk, channel.pk)
        outcome, error = AttemptOutcome.RETRY, f"{type(exc).__name__}: {exc}"
    retry_in = _finish_recorded(
        notification,
        attempt,
        claimed=claimed,
        outcome=outcome,
        latency_ms=round((time.monotonic() - started) * 1000, 3),
        http_status=http_status,
        excerpt=excerpt,
        error=error,
        note=note,
        now=now + timedelta(seconds=time.monotonic() - started),
    )
    # After the notification's own row: disabling the channel cancels what still waits.
    if outcome == AttemptOutcome.SUCCESS and channel.consecutive_failures:
        Channel.objects.filter(pk=channel.pk).update(consecutive_failures=0)
    elif outcome == AttemptOutcome.PERMANENT and failure is not None:
        _channel_failed(channel, failure)
    return DeliveryResult(notification_id, sent=True, outcome=outcome, retry_in_s=retry_in)


def notifications_due(
    *, now: datetime | None = None, grace_s: float = 0, limit: int = 500, per_team: int = 20
) -> list[int]:
    """Pending notifications due for ``grace_s`` seconds at least, that nobody holds.

    At most ``per_team`` of each team's, oldest first, so that a team with thousands
    due never fills the sweep and leaves another's waiting for the next one.
    """
    now = now or timezone.now()
    ranked = _unheld_due(now=now, due_by=now - timedelta(seconds=grace_s)).annotate(
        rank=Window(RowNumber(), partition_by=F("team_id"), order_by=F("next_attempt_at").asc())
    )
    return list(
        ranked.filter(rank__lte=per_team)
        .order_by("next_attempt_at")
        .values_list("pk", flat=True)[:limit]
    )


def _busy_delay() -> float:
    return BUSY_RETRY_S * random.uniform(1 - JITTER, 1 + JITTER)
