"""Webhook bodies by format, each rendered from a notification's frozen payload."""

from collections.abc import Callable

from apps.alerts.formats import alertmanager, native, slack
from apps.alerts.models import Channel, WebhookFormat
from apps.alerts.payload_types import Payload

Renderer = Callable[[Channel, Payload], tuple[bytes, str]]

RENDERERS: dict[str, Renderer] = {
    WebhookFormat.NATIVE: native.render,
    WebhookFormat.ALERTMANAGER: alertmanager.render,
    WebhookFormat.SLACK: slack.render,
}


def render(channel: Channel, payload: Payload) -> tuple[bytes, str]:
    """The body and its content type in ``channel``'s format."""
    return RENDERERS[channel.format](channel, payload)
