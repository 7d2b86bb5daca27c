"""Services: the addresses of e-mail channels are asked to confirm, and answer.

Whatever door a channel comes through (the form, the API, a configuration file), its
service calls ``recipients_sync``: each new address gets a row and a confirmation
e-mail, sent by the worker once the change is committed (an apply that fails mails
nobody). The e-mails of one account's teams count against its hourly allowance
(ACCOUNT_CONFIRMATIONS_PER_HOUR); a change that would pass it is refused whole.
"""

import logging
from datetime import datetime, timedelta
from functools import partial

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import F, Q
from django.db.models.functions import Lower
from django.utils import timezone

from apps.alerts.models import Channel, ChannelKind, ChannelRecipient, RecipientState
from apps.alerts.selectors.recipients import channel_recipient_statuses
from apps.alerts.transports.base import TransportError
from apps.teams.accounts import account_rate_take, account_teams
from apps.teams.ratelimit import RateExceeded, wait_words
from apps.teams.selectors import verified_member_emails

logger = logging.getLogger(__name__)

# A sender that died mid-send leaves its claim to expire after this long; then it is due again.
SEND_LEASE = timedelta(minutes=2)
# Waits after the 1st, 2nd, … failed send; after the last, a writer resends by hand.
SEND_RETRY_DELAYS = (timedelta(minutes=1), timedelta(minutes=5), timedelta(minutes=15))
CONFIRMATIONS = "confirmation e-mails"


def _schedule_send(channel_id: int) -> None:
    from apps.alerts.tasks import send_confirmations

    transaction.on_commit(partial(send_confirmations.delay, channel_id))


def _declined_by_account(channel: Channel, addresses: list[str]) -> set[str]:
    """Of ``addresses`` (lowercased), those that declined a channel of this account."""
    return set(
        ChannelRecipient.objects.filter(
            team__in=account_teams(team=channel.team), state=RecipientState.DECLINED
        )
        .annotate(address=Lower("email"))
        .filter(address__in=addresses)
        .values_list("address", flat=True)
    )


def recipients_sync(*, channel: Channel, now: datetime) -> None:
    """Give each new address of ``channel`` a row, and the ones that must confirm their
    e-mail; forget removed addresses, except declines, which stay with the channel."""
    if channel.kind != ChannelKind.EMAIL:
        return
    wanted = {address.lower(): address for address in channel.email_to}
    rows = list(ChannelRecipient.objects.filter(channel=channel))
    ChannelRecipient.objects.filter(
        pk__in=[
            row.pk
            for row in rows
            if row.email.lower() not in wanted and row.state != RecipientState.DECLINED
        ]
    ).delete()
    known = {row.email.lower() for row in rows}
    new = [key for key in wanted if key not in known]
    if not new:
        return
    declined = _declined_by_account(channel, new)
    members = verified_member_emails(team=channel.team)
    created = [
        ChannelRecipient(
            team_id=channel.team_id,
            channel=channel,
            email=wanted[key],
            state=RecipientState.DECLINED if key in declined else RecipientState.WAITING,
            created_at=now,
            confirmation_due_at=None if key in declined or key in members else now,
        )
        for key in new
    ]
    asked = sum(1 for row in created if row.confirmation_due_at is not None)
    if asked:
        account_rate_take(
            team=channel.team,
            what=CONFIRMATIONS,
            setting="ACCOUNT_CONFIRMATIONS_PER_HOUR",
            amount=asked,
        )
    ChannelRecipient.objects.bulk_create(created)
    if asked:
        _schedule_send(channel.pk)


def recipients_release(*, channel: Channel) -> None:
    """Before the channel goes: its rows go too, but declines, which outlive it."""
    ChannelRecipient.objects.filter(channel=channel).exclude(state=RecipientState.DECLINED).delete()


def recipient_confirmation_resend(
    *, channel: Channel, address: str, now: datetime
) -> ChannelRecipient:
    """Mail an address that has not answered its confirmation again (a fresh link), at
    most once per CHANNEL_CONFIRMATION_RESEND_INTERVAL_S, within the account's allowance."""
    status = next(
        (
            s
            for s in channel_recipient_statuses(channel=channel)
            if s.address.lower() == address.lower()
        ),
        None,
    )
    if status is None or status.recipient is None:
        raise ValidationError({"address": f"“{address}” is not an address of this channel."})
    recipient = status.recipient
    if status.state == RecipientState.CONFIRMED:
        raise ValidationError(f"{status.address} receives this channel already.")
    if status.state == RecipientState.DECLINED:
        raise ValidationError(
            f"{status.address} declined this channel; only its owner can change that, "
            "from a link they were sent."
        )
    if recipient.confirmation_due_at is not None and not recipient.confirmation_error:
        raise ValidationError(f"The confirmation to {status.address} is on its way already.")
    interval = timedelta(seconds=settings.CHANNEL_CONFIRMATION_RESEND_INTERVAL_S)
    sent = recipient.confirmation_sent_at
    if sent is not None and now < sent + interval:
        wait = max(1, int((sent + interval - now).total_seconds()))
        raise RateExceeded(
            f"The confirmation to {status.address} was sent less than "
            f"{wait_words(int(interval.total_seconds()))} ago; try again in {wait_words(wait)}.",
            retry_after_s=wait,
        )
    with transaction.atomic():
        # Two clicks at once: one claims the row, the other finds nothing to claim.
        claimed = ChannelRecipient.objects.filter(
            pk=recipient.pk,
            state=RecipientState.WAITING,
            confirmation_sent_at=sent,
            confirmation_due_at=recipient.confirmation_due_at,
        ).update(confirmation_due_at=now, confirmation_failures=0, confirmation_error="")
        if not claimed:
            raise ValidationError(f"The confirmation to {status.address} is on its way already.")
        account_rate_take(
            team=channel.team, what=CONFIRMATIONS, setting="ACCOUNT_CONFIRMATIONS_PER_HOUR"
        )
        _schedule_send(channel.pk)
    recipient.refresh_from_db()
    return recipient


def recipient_answer(*, recipient: ChannelRecipient, confirm: bool) -> ChannelRecipient:
    """The address's own answer, from its link: confirm, or decline (and stop)."""
    state = RecipientState.CONFIRMED if confirm else RecipientState.DECLINED
    recipient.state = state
    recipient.answered_at = timezone.now()
    # Nothing more to ask once it answered.
    recipient.confirmation_due_at = None
    recipient.save(update_fields=["state", "answered_at", "confirmation_due_at"])
    return recipient


def _due(now: datetime) -> Q:
    return Q(confirmation_due_at__lte=now, state=RecipientState.WAITING)


def _claim(recipient: ChannelRecipient, now: datetime) -> bool:
    return bool(
        ChannelRecipient.objects.filter(_due(now), pk=recipient.pk)
        .filter(confirmation_due_at=recipient.confirmation_due_at)
        .update(confirmation_due_at=now + SEND_LEASE)
    )


def _failed(recipient: ChannelRecipient, error: TransportError, now: datetime) -> None:
    """Note the failure, and when the sweep tries again (never after a permanent one)."""
    failures = recipient.confirmation_failures + 1
    retry = not error.permanent and failures <= len(SEND_RETRY_DELAYS)
    ChannelRecipient.objects.filter(pk=recipient.pk).update(
        confirmation_failures=F("confirmation_failures") + 1,
        confirmation_error=str(error)[:500],
        confirmation_due_at=now + SEND_RETRY_DELAYS[failures - 1] if retry else None,
    )


def recipient_confirmations_send(
    *, channel_id: int | None = None, now: datetime | None = None, grace_s: float = 0
) -> int:
    """Mail the confirmations due (of one channel, or every one due ``grace_s`` seconds
    at least, for the sweep); each is claimed first, so two senders never both mail it.
    Returns how many were sent."""
    from apps.alerts.transports.email import confirmation_email_send

    now = now or timezone.now()
    due = ChannelRecipient.objects.filter(
        _due(now - timedelta(seconds=grace_s)), channel__isnull=False
    ).select_related("channel", "team")
    if channel_id is not None:
        due = due.filter(channel_id=channel_id)
    sent = 0
    members: dict[int, set[str]] = {}
    for recipient in due.order_by("confirmation_due_at")[:500]:
        if not _claim(recipient, now):
            continue
        team = recipient.team
        if team.pk not in members:
            members[team.pk] = verified_member_emails(team=team)
        if recipient.email.lower() in members[team.pk]:
            # A verified member receives the channel without confirming.
            ChannelRecipient.objects.filter(pk=recipient.pk).update(confirmation_due_at=None)
            continue
        try:
            confirmation_email_send(recipient=recipient)
        except TransportError as exc:
            logger.warning("confirmation %s not sent: %s", recipient.pk, exc)
            _failed(recipient, exc, now)
            continue
        ChannelRecipient.objects.filter(pk=recipient.pk).update(
            confirmation_due_at=None,
            confirmation_sent_at=timezone.now(),
            confirmation_failures=0,
            confirmation_error="",
        )
        sent += 1
    return sent
