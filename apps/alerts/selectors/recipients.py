"""Reads: each address of an e-mail channel with the state that decides what it receives.

An address receives alerts, reminders, resolutions and tests once it confirmed by its
link, or at once when it is the address of a member of the channel's team who is a
verified user; a decline beats both. Everything else waits, and gets nothing but its
confirmation e-mail.
"""

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from apps.alerts.models import Channel, ChannelKind, ChannelRecipient, RecipientState
from apps.teams.models import Team
from apps.teams.selectors import verified_member_emails


@dataclass(frozen=True)
class RecipientStatus:
    """An address as its channel's pages, the API and the delivery see it."""

    address: str
    state: str
    # Confirmed because it is a verified member's address, not by its link.
    by_membership: bool
    recipient: ChannelRecipient | None

    @property
    def receives(self) -> bool:
        return self.state == RecipientState.CONFIRMED

    @property
    def confirmation_sent_at(self) -> datetime | None:
        return self.recipient.confirmation_sent_at if self.recipient else None

    @property
    def confirmation_error(self) -> str:
        return self.recipient.confirmation_error if self.recipient else ""

    @property
    def label(self) -> str:
        if self.by_membership:
            return "confirmed (verified member)"
        return RecipientState(self.state).label


def _status(address: str, row: ChannelRecipient | None, members: set[str]) -> RecipientStatus:
    if row is not None and row.state in (RecipientState.DECLINED, RecipientState.CONFIRMED):
        return RecipientStatus(address, row.state, False, row)
    if address.lower() in members:
        return RecipientStatus(address, RecipientState.CONFIRMED, True, row)
    return RecipientStatus(address, RecipientState.WAITING, False, row)


def channels_recipient_statuses(
    *, team: Team, channels: Iterable[Channel]
) -> dict[int, list[RecipientStatus]]:
    """The addresses of the team's e-mail ``channels``, in each channel's order: two
    queries whatever their number."""
    mailing = [c for c in channels if c.kind == ChannelKind.EMAIL]
    if not mailing:
        return {}
    rows: dict[int, dict[str, ChannelRecipient]] = defaultdict(dict)
    for row in ChannelRecipient.objects.filter(channel__in=mailing):
        assert row.channel_id is not None
        rows[row.channel_id][row.email.lower()] = row
    members = verified_member_emails(team=team)
    return {
        channel.pk: [
            _status(address, rows[channel.pk].get(address.lower()), members)
            for address in channel.email_to
        ]
        for channel in mailing
    }


def channel_recipient_statuses(*, channel: Channel) -> list[RecipientStatus]:
    return channels_recipient_statuses(team=channel.team, channels=[channel]).get(channel.pk, [])


def recipient_status(*, recipient: ChannelRecipient) -> RecipientStatus:
    """One address's state, for the page its link opens."""
    waiting = recipient.state == RecipientState.WAITING
    members = verified_member_emails(team=recipient.team) if waiting else set()
    return _status(recipient.email, recipient, members)
