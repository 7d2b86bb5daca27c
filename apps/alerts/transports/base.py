"""The contract every transport keeps, and the registry from channel kind to transport."""

from dataclasses import dataclass
from typing import Protocol

from apps.alerts.models import Channel, Notification


@dataclass(frozen=True)
class Delivered:
    """A notification the receiver accepted; ``note`` says what else to log with the
    attempt, such as the addresses an e-mail left out."""

    http_status: int | None = None
    excerpt: str = ""
    note: str = ""


class NobodyToTell(Exception):
    """Nothing was sent because nobody may receive it (every address of an e-mail
    channel waits for its confirmation or declined): the notification is cancelled with
    this message, which is neither a failure of the channel nor worth a retry."""


class TransportError(Exception):
    """A notification not delivered: ``permanent`` when trying again cannot help.

    ``disable`` asks for the channel to be disabled at once (a webhook answering 410
    Gone). ``http_status`` and ``excerpt`` (the start of the response body) are logged
    with the attempt.
    """

    def __init__(
        self,
        message: str,
        *,
        permanent: bool,
        http_status: int | None = None,
        excerpt: str = "",
        disable: bool = False,
    ) -> None:
        super().__init__(message)
        self.permanent = permanent
        self.http_status = http_status
        self.excerpt = excerpt
        self.disable = disable


class Transport(Protocol):
    def notify(self, *, channel: Channel, notification: Notification, timestamp: int) -> Delivered:
        """Send ``notification.payload`` through ``channel``; raise TransportError if not sent.

        ``timestamp`` (epoch seconds) is this attempt's time, signed with webhooks. A
        transport never retries itself: the caller logs the attempt and schedules the next.
        """
        ...
