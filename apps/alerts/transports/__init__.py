"""Transports by channel kind: each keeps the contract of ``base.Transport``."""

from collections.abc import Callable

from apps.alerts.models import Channel, ChannelKind
from apps.alerts.transports.base import Transport
from apps.alerts.transports.email import EmailTransport
from apps.alerts.transports.webhook import WebhookTransport

TRANSPORTS: dict[str, Callable[[], Transport]] = {
    ChannelKind.EMAIL: EmailTransport,
    ChannelKind.WEBHOOK: WebhookTransport,
}


def transport_for(channel: Channel) -> Transport:
    try:
        return TRANSPORTS[channel.kind]()
    except KeyError:
        raise KeyError(f"No transport for channel kind “{channel.kind}”.") from None
