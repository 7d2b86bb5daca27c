"""Services: channels are created, changed, enabled, deleted and tested here.

An account holds at most ACCOUNT_MAX_CHANNELS channels over all its teams, and each
address of an e-mail channel is asked to confirm before it receives anything
(``services.recipients``).
"""

from collections.abc import Sequence

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.alerts.channel_clean import channel_clean
from apps.alerts.models import Channel, ChannelKind, Notification, NotificationStatus, WebhookFormat
from apps.alerts.services.recipients import recipients_release, recipients_sync
from apps.alerts.services.webhook_targets import webhook_url_clean
from apps.alerts.transports.signing import secret_generate
from apps.teams.accounts import account_cap_error, account_lock, account_teams
from apps.teams.models import Team


def _clean(channel: Channel, *, stored_url: str | None = None) -> None:
    """Kind-specific rules, then the model's own (slug, lengths, uniqueness).

    A webhook URL other than ``stored_url`` (the one saved before; None for a new
    channel) is judged by the rule its sends follow (``webhook_url_clean``)."""
    if channel.kind == ChannelKind.EMAIL:
        channel.email_to = channel_clean({"email_to": channel.email_to})["email_to"]
        channel.url, channel.secret, channel.secret_env = "", "", ""
        channel.format = WebhookFormat.NATIVE
    elif channel.kind == ChannelKind.WEBHOOK:
        channel.email_to = []
        fields = ("url", "secret", "format")
        for name, value in channel_clean({f: getattr(channel, f) for f in fields}).items():
            setattr(channel, name, value)
        if channel.url != stored_url:
            channel.url_warning = webhook_url_clean(url=channel.url, team_slug=channel.team.slug)
        if not channel.secret:
            channel.secret = secret_generate()
    channel.full_clean()


def _channel_cap_check(team: Team) -> None:
    cap = settings.ACCOUNT_MAX_CHANNELS
    if not cap:
        return
    account_lock(team=team)
    used = Channel.objects.filter(team__in=account_teams(team=team)).count()
    if used >= cap:
        raise account_cap_error(
            what="alert channels",
            used=used,
            cap=cap,
            setting="ACCOUNT_MAX_CHANNELS",
            code="too_many_channels",
        )


@transaction.atomic
def channel_create(
    *,
    team: Team,
    slug: str,
    kind: str,
    name: str = "",
    email_to: Sequence[str] = (),
    url: str = "",
    format: str = WebhookFormat.NATIVE,
    secret: str = "",
    secret_env: str = "",
) -> Channel:
    """A new channel; a webhook without a secret gets a fresh one, and an e-mail
    channel's addresses their confirmation e-mails. A webhook URL that a send would
    refuse is a ValidationError on ``url``; one whose host does not resolve now is saved,
    and ``channel.url_warning`` says so."""
    channel = Channel(
        team=team,
        slug=slug,
        kind=kind,
        name=name,
        email_to=list(email_to),
        url=url,
        format=format,
        secret=secret,
        secret_env=secret_env,
    )
    _clean(channel)
    _channel_cap_check(team)
    channel.save()
    recipients_sync(channel=channel, now=timezone.now())
    return channel


@transaction.atomic
def channel_update(
    *,
    channel: Channel,
    name: str | None = None,
    email_to: Sequence[str] | None = None,
    url: str | None = None,
    format: str | None = None,
    secret: str | None = None,
    secret_env: str | None = None,
) -> Channel:
    """Change what is given; the kind and slug stay. A secret of "" keeps the current one.
    New addresses are asked to confirm; removed ones are forgotten, but not their no.
    A new webhook URL is checked as on creation (``channel.url_warning`` says more)."""
    stored_url = channel.url
    if name is not None:
        channel.name = name
    if email_to is not None:
        channel.email_to = list(email_to)
    if url is not None:
        channel.url = url
    if format is not None:
        channel.format = format
    if secret:
        channel.secret = secret
    if secret_env is not None:
        channel.secret_env = secret_env
    _clean(channel, stored_url=stored_url)
    channel.save()
    recipients_sync(channel=channel, now=timezone.now())
    return channel


def channel_secret_rotate(*, channel: Channel) -> Channel:
    channel.secret = secret_generate()
    channel.secret_env = ""
    channel.save(update_fields=["secret", "secret_env", "updated_at"])
    return channel


def channel_enable(*, channel: Channel) -> Channel:
    """Back into service after it was disabled; the failure count starts again."""
    channel.disabled_at = None
    channel.disabled_reason = ""
    channel.consecutive_failures = 0
    channel.save(
        update_fields=["disabled_at", "disabled_reason", "consecutive_failures", "updated_at"]
    )
    return channel


def channel_disable(*, channel: Channel, reason: str) -> bool:
    """Disable and cancel what waits to be sent; False when it was disabled already."""
    with transaction.atomic():
        disabled = Channel.objects.filter(pk=channel.pk, disabled_at__isnull=True).update(
            disabled_at=timezone.now(), disabled_reason=reason[:500]
        )
        if disabled:
            Notification.objects.filter(
                channel_id=channel.pk, status=NotificationStatus.PENDING
            ).update(
                status=NotificationStatus.CANCELLED,
                finished_at=timezone.now(),
                last_error="The channel was disabled.",
            )
    channel.refresh_from_db()
    return bool(disabled)


@transaction.atomic
def channel_delete(*, channel: Channel) -> None:
    recipients_release(channel=channel)
    channel.delete()
