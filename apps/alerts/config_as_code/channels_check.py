"""What a webhook in the file may only keep from the database, checked once the team is
known: a URL in the form viewers see, and a ``secret_env`` this door may not read; and a
new or changed URL by the rule its sends follow (``services.webhook_targets``), so that
a plan shows the refusal at the URL's line rather than the apply failing."""

from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ValidationError

from apps.alerts.config_as_code.channels_schema import ChannelSpec, ChannelsSpec
from apps.alerts.config_as_code.selectors import channels_for_config
from apps.alerts.models import Channel, ChannelKind
from apps.alerts.services.webhook_targets import webhook_url_clean
from apps.alerts.webhook_urls import url_as_written, url_is_hidden
from apps.pipelines.config_as_code.reader import Reader
from apps.pipelines.config_as_code.steps import PlanOptions
from apps.teams.models import Team

# One message whatever the variable: whether it exists is never looked up, nor told.
UNREADABLE_ENV = (
    "“secret_env” is read from the server's environment only by manage.py budgets apply "
    "(or, here, for variables the operator allows in CONFIG_SECRET_ENV_PREFIXES): a file "
    "applied here may only keep the variable its channel already has. Leave secret_env "
    "out (the channel keeps its signing secret, a new one gets a fresh one), or apply the "
    "file with the command."
)


def _hidden_url(url: str) -> str:
    return (
        f"“{url}” is a webhook URL with its path hidden, as viewers see it, and it is not "
        "this channel's stored URL in that form: write the whole URL."
    )


def _check_address(spec: ChannelSpec, stored_url: str, team: Team, reader: Reader) -> None:
    """A new or changed URL, by the rule its sends follow, as the service will at apply."""
    url = url_as_written(written=spec.url, stored=stored_url).strip()
    if not url or url == stored_url:
        return
    try:
        warning = webhook_url_clean(url=url, team_slug=team.slug)
    except ValidationError as exc:
        for message in exc.message_dict.get("url", exc.messages):
            reader.error(spec.url_line, message)
        return
    if warning:
        reader.warning(spec.url_line, f"channel {spec.slug}: {warning}")


def _check(spec: ChannelSpec, stored: Channel | None, reader: Reader) -> None:
    stored_url = stored.url if stored is not None else ""
    if url_is_hidden(spec.url) and url_as_written(written=spec.url, stored=stored_url) == spec.url:
        reader.error(spec.url_line, _hidden_url(spec.url))
    kept = stored is not None and stored.secret_env == spec.secret_env
    if not spec.secret_env_read and not kept:
        reader.error(spec.secret_env_line, UNREADABLE_ENV)


def check_channels(
    team: Team | None,
    spec: ChannelsSpec,
    document: Mapping[str, Any],
    options: PlanOptions,
    reader: Reader,
) -> None:
    current = {c.slug: c for c in channels_for_config(team=team)} if team else {}
    for channel in spec.channels:
        if channel.kind != ChannelKind.WEBHOOK:
            continue
        stored = current.get(channel.slug)
        webhook = stored if stored and stored.kind == ChannelKind.WEBHOOK else None
        errors = len(reader.errors)
        _check(channel, webhook, reader)
        # A team the file creates is checked when applied: its slug may name it in
        # WEBHOOK_ALLOWED_HOSTS, and the service checks with it.
        if team is not None and len(reader.errors) == errors:
            _check_address(channel, webhook.url if webhook else "", team, reader)
