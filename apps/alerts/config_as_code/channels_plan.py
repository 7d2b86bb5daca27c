"""Diff of the ``channels:`` section against the database, as steps that call the services."""

import json
from collections.abc import Callable

from django.utils.crypto import salted_hmac

from apps.alerts.config_as_code.channels_schema import ChannelSpec, ChannelsSpec
from apps.alerts.config_as_code.selectors import channels_for_config
from apps.alerts.models import Channel, ChannelKind
from apps.alerts.services.channels import channel_create, channel_delete, channel_update
from apps.alerts.services.rules import alert_rule_update
from apps.alerts.webhook_urls import url_as_written
from apps.pipelines.config_as_code.steps import Plan, PlanOptions, Step
from apps.teams.models import Team

_FINGERPRINT_SALT = "alerts.config-as-code.channel-secrets"


def _shown(value: str | list[str]) -> str:
    if not value:
        return "(none)"
    if isinstance(value, list):
        return ", ".join(value)
    return json.dumps(value, ensure_ascii=False)


def _url(channel: Channel, spec: ChannelSpec) -> str:
    """A URL in viewers' form that stands for the stored one keeps it."""
    return url_as_written(written=spec.url, stored=channel.url)


def _differences(channel: Channel, spec: ChannelSpec) -> list[str]:
    """What changes, in words; a secret is only ever said to change, never shown."""
    changes = []
    if channel.name != spec.name:
        changes.append(f"name {_shown(channel.name)} -> {_shown(spec.name)}")
    if spec.kind == ChannelKind.EMAIL:
        if list(channel.email_to) != list(spec.email_to):
            changes.append(f"to {_shown(channel.email_to)} -> {_shown(list(spec.email_to))}")
        return changes
    url = _url(channel, spec)
    if channel.url != url:
        changes.append(f"url {_shown(channel.url)} -> {_shown(url)}")
    if channel.format != spec.format:
        changes.append(f"format {channel.format} -> {spec.format}")
    if channel.secret_env != spec.secret_env:
        kept = "" if spec.secret_env else " (the current secret stays)"
        changes.append(
            f"secret_env {_shown(channel.secret_env)} -> {_shown(spec.secret_env)}{kept}"
        )
    if spec.secret and spec.secret != channel.secret:
        changes.append(f"secret changed (from {spec.secret_env})")
    return changes


def _create(team: Team, spec: ChannelSpec) -> Channel:
    return channel_create(
        team=team,
        slug=spec.slug,
        kind=spec.kind,
        name=spec.name,
        email_to=spec.email_to,
        url=spec.url,
        format=spec.format,
        secret=spec.secret,
        secret_env=spec.secret_env,
    )


def _creating(spec: ChannelSpec) -> Callable[[Team], object]:
    return lambda team: _create(team, spec)


def _updating(channel: Channel, spec: ChannelSpec) -> Callable[[Team], object]:
    return lambda team: channel_update(
        channel=channel,
        name=spec.name,
        email_to=spec.email_to,
        url=_url(channel, spec),
        format=spec.format,
        secret=spec.secret,  # "" keeps the stored secret
        secret_env=spec.secret_env,
    )


def _replacing(channel: Channel, spec: ChannelSpec) -> Callable[[Team], object]:
    """A channel's kind never changes in place: delete it, create it anew, keep its rules."""

    def run(team: Team) -> None:
        rules = list(channel.rules.all())
        channel_delete(channel=channel)
        replacement = _create(team, spec)
        for rule in rules:
            alert_rule_update(rule=rule, channels=[*rule.channels.all(), replacement])

    return run


def _deleting(channel: Channel) -> Callable[[Team], object]:
    return lambda team: channel_delete(channel=channel)


def plan_channels(team: Team | None, spec: ChannelsSpec, options: PlanOptions) -> Plan:
    current = {c.slug: c for c in channels_for_config(team=team)} if team else {}
    plan = Plan()
    for channel_spec in spec.channels:
        channel = current.get(channel_spec.slug)
        if channel is None:
            plan.add(
                Step([f"+ channel {channel_spec.slug}"], _creating(channel_spec), channel_spec.line)
            )
        elif channel.kind != channel_spec.kind:
            line = (
                f"~ channel {channel.slug}: kind {channel.kind} -> {channel_spec.kind}"
                " (replaced: its delivery history is deleted)"
            )
            plan.add(Step([line], _replacing(channel, channel_spec), channel_spec.line))
        else:
            changes = _differences(channel, channel_spec)
            if changes:
                lines = [f"~ channel {channel.slug}: {change}" for change in changes]
                plan.add(Step(lines, _updating(channel, channel_spec), channel_spec.line))
    listed = spec.slugs()
    for slug, channel in current.items():
        if slug in listed:
            continue
        if options.prune:
            plan.add(Step([f"- channel {slug}"], _deleting(channel)))
        else:
            plan.notes.append(f"= channel {slug}: not in the file, left alone (--prune deletes it)")
    return plan


def fingerprint_channels(spec: ChannelsSpec) -> str:
    """Changes with the secrets read from the environment, and reveals none of them."""
    secrets = "\n".join(f"{c.slug}\0{c.secret}" for c in spec.channels if c.secret)
    return salted_hmac(_FINGERPRINT_SALT, secrets).hexdigest() if secrets else ""
