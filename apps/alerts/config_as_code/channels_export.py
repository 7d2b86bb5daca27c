"""The ``channels:`` section as data: the secret's variable is written, the secret never."""

from typing import Any

from apps.alerts.config_as_code.selectors import channels_for_config
from apps.alerts.models import Channel, ChannelKind, WebhookFormat
from apps.teams.models import Team


def _channel(channel: Channel) -> dict[str, Any]:
    data: dict[str, Any] = {"slug": channel.slug}
    if channel.name:
        data["name"] = channel.name
    data["kind"] = channel.kind
    if channel.kind == ChannelKind.EMAIL:
        data["to"] = list(channel.email_to)
        return data
    data["url"] = channel.url
    if channel.secret_env:
        data["secret_env"] = channel.secret_env
    if channel.format != WebhookFormat.NATIVE:
        data["format"] = channel.format
    return data


def export_channels(team: Team) -> list[dict[str, Any]] | None:
    channels = [_channel(channel) for channel in channels_for_config(team=team)]
    return channels or None
