"""The ``channels:`` section as data: the secret's variable is written, the secret never,
and a webhook URL whole only for those who may change the channel."""

from typing import Any

from apps.alerts.config_as_code.selectors import channels_for_config
from apps.alerts.models import Channel, ChannelKind, WebhookFormat
from apps.alerts.webhook_urls import url_for_viewers
from apps.pipelines.config_as_code.steps import ExportOptions
from apps.teams.models import Team


def _channel(channel: Channel, options: ExportOptions) -> dict[str, Any]:
    data: dict[str, Any] = {"slug": channel.slug}
    if channel.name:
        data["name"] = channel.name
    data["kind"] = channel.kind
    if channel.kind == ChannelKind.EMAIL:
        data["to"] = list(channel.email_to)
        return data
    data["url"] = url_for_viewers(channel.url) if options.masked else channel.url
    if channel.secret_env:
        data["secret_env"] = channel.secret_env
    if channel.format != WebhookFormat.NATIVE:
        data["format"] = channel.format
    return data


def export_channels(team: Team, options: ExportOptions) -> list[dict[str, Any]] | None:
    channels = [_channel(channel, options) for channel in channels_for_config(team=team)]
    return channels or None
