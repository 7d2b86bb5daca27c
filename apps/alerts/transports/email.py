"""E-mail: subject, text and HTML from templates/emails/, sent by Django's mail backend.

An alert goes only to the addresses that asked for it (``selectors.recipients``), one
message each, with a link to stop. SMTP says itself whether trying again can help: 5xx
replies are permanent, 4xx ones and a server that cannot be reached are not.
"""

import smtplib
from email.utils import parseaddr
from typing import Any, cast
from urllib.parse import urlsplit

from django.conf import settings
from django.core.mail import EmailMultiAlternatives, get_connection
from django.urls import reverse

from apps.alerts.formats import text
from apps.alerts.models import Channel, ChannelRecipient, Notification
from apps.alerts.payload_types import Payload
from apps.alerts.recipient_links import recipient_unsubscribe_url, recipient_url
from apps.alerts.selectors.recipients import RecipientStatus, channel_recipient_statuses
from apps.alerts.transports.base import Delivered, NobodyToTell, TransportError
from apps.core.mail import mail_build, site_host
from apps.teams.accounts import account_verified

# Used when EMAIL_TIMEOUT is unset: well inside the delivery's two-minute lease.
SMTP_TIMEOUT_S = 30.0
_TAGS = {text.RESOLVED: "RESOLVED", text.NO_DATA: "NO DATA", text.TEST: "TEST"}


def _domain() -> str:
    """For Message-IDs: the sender's domain, else the site's."""
    address = parseaddr(settings.DEFAULT_FROM_EMAIL)[1]
    if "@" in address:
        return address.rsplit("@", 1)[1]
    return urlsplit(settings.SITE_URL).hostname or "localhost"


def alert_context(channel: Channel, payload: Payload) -> dict[str, Any]:
    """What the alert templates show, numbers formatted the way every format shows them."""
    kind = text.event(payload)
    links = payload["links"]
    return {
        "payload": payload,
        "kind": kind,
        "tag": _TAGS.get(kind, payload["rule"]["severity"].upper()),
        "severity": payload["rule"]["severity"],
        "team": payload["team"],
        "rule": payload["rule"],
        "pipeline": payload["pipeline"],
        "stage": payload["stage"],
        "channel": channel,
        "scope": text.scope(payload),
        "observation": text.observation(payload),
        "description": text.description(payload),
        "burn_rate": text.is_burn_rate(payload),
        "degradation": _degradation(payload),
        "violation": not text.is_burn_rate(payload) and text.degradation(payload) is None,
        "percentile": payload["percentile"],
        "observed": text.ms(payload["observed_ms"]),
        "observed_known": payload["observed_ms"] is not None,
        "budget": text.ms(payload["budget_ms"]),
        "over_by": text.ms(payload["over_by_ms"]) if payload["over_by_ms"] else "",
        "window": text.duration(payload["window_s"]),
        "duration": text.duration(payload["incident"]["duration_s"]),
        "reminder": payload["reminder"],
        "burn_rates": [
            {
                "long": text.duration(pair["long_window_s"]),
                "short": text.duration(pair["short_window_s"]),
                "factor": f"{pair['factor']:g}",
                "long_rate": text.rate(pair["long_burn_rate"]),
                "short_rate": text.rate(pair["short_burn_rate"]),
            }
            for pair in payload["burn_rates"]
        ],
        "rows": [
            {
                "name": row["name"],
                "slug": row["slug"],
                "percentile": row["percentile"] or "",
                "observed": text.ms(row["observed_ms"]),
                "budget": text.ms(row["budget_ms"]),
                "over_by": text.ms(row["over_by_ms"]) if row["over_by_ms"] else text.MISSING,
                "over": bool(row["over_by_ms"]),
                "share": text.share(row["share"]),
            }
            for row in payload["top_stages"]
        ],
        "traces": [
            {"id": trace_id, "url": url}
            for trace_id, url in zip(payload["example_trace_ids"], links["traces"], strict=False)
        ],
        "dashboard_url": links["dashboard"],
        "incident_url": links["incident"],
        "incident_id": payload["incident"]["id"],
        # The subject carries the names the team chose only when its account is
        # verified; the body goes only to addresses that confirmed.
        "named": account_verified(team=channel.team),
    }


def _degradation(payload: Payload) -> dict[str, str] | None:
    facts = text.degradation(payload)
    if facts is None:
        return None
    return {
        "rate": text.percent(facts["rate_percent"]),
        "peak": text.percent(facts["peak_rate_percent"]),
        "degraded": str(facts["degraded"]),
        "requests": str(facts["requests"]),
        "threshold": text.threshold(facts["threshold_percent"]),
        "actions": text.counts(facts["by_action"]),
        "stages": text.counts(facts["by_stage"]),
        # The share it resolved on, when it resolved on one (not for lack of data).
        "recovered": "yes" if payload["incident"]["resolution"] == "recovered" else "",
    }


def _message(
    name: str,
    context: dict[str, Any],
    to: list[str],
    headers: dict[str, str],
    connection: Any = None,
) -> EmailMultiAlternatives:
    return mail_build(
        name, context, to, timeout=SMTP_TIMEOUT_S, headers=headers, connection=connection
    )


def _refusal(exc: smtplib.SMTPRecipientsRefused) -> TransportError:
    codes = [code for code, _ in exc.recipients.values()]
    said = "; ".join(
        f"{address}: {code} {reply.decode(errors='replace')}"
        for address, (code, reply) in exc.recipients.items()
    )
    # A 4xx refusal (a full mailbox, greylisting) may pass later; 5xx ones will not.
    permanent = all(code >= 500 for code in codes)
    return TransportError(f"every recipient was refused: {said}", permanent=permanent)


def _transport_error(exc: Exception) -> TransportError:
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        return _refusal(exc)
    if isinstance(exc, smtplib.SMTPServerDisconnected | smtplib.SMTPConnectError):
        return TransportError(f"SMTP server unreachable: {exc}", permanent=False)
    if isinstance(exc, smtplib.SMTPResponseException):
        reply = (
            exc.smtp_error.decode(errors="replace")
            if isinstance(exc.smtp_error, bytes)
            else exc.smtp_error
        )
        return TransportError(f"SMTP {exc.smtp_code} {reply}", permanent=500 <= exc.smtp_code < 600)
    # Refused connections, timeouts, TLS failures: the server may be back soon.
    return TransportError(f"{type(exc).__name__}: {exc}", permanent=False)


def _send(message: EmailMultiAlternatives) -> None:
    try:
        message.send()
    except (smtplib.SMTPException, OSError) as exc:
        raise _transport_error(exc) from exc


def _left_out(statuses: list[RecipientStatus]) -> str:
    return ", ".join(f"{s.address} ({s.label})" for s in statuses)


class EmailTransport:
    def notify(self, *, channel: Channel, notification: Notification, timestamp: int) -> Delivered:
        """Mail each address of the channel that confirmed (or is a verified member's),
        one message each with its own link to stop; the others are left out and named in
        the note. The Message-ID is the same on every retry, so a message that did arrive
        before a failure shows once in a mail client."""
        statuses = channel_recipient_statuses(channel=channel)
        to = [s for s in statuses if s.receives and s.recipient is not None]
        skipped = [s for s in statuses if s not in to]
        if not to:
            raise NobodyToTell(f"Sent to nobody: {_left_out(skipped)}.")
        payload = cast(Payload, notification.payload)
        headers = {
            "Message-ID": f"<{notification.message_id}@{_domain()}>",
            "X-Latency-Budgets-Message-Id": notification.message_id,
        }
        context = alert_context(channel, payload)
        refused = _send_each("alert", context, headers, to)
        notes = []
        if refused:
            notes.append(f"Refused: {'; '.join(str(error) for error in refused)}.")
        if skipped:
            notes.append(f"Not sent to {_left_out(skipped)}.")
        return Delivered(note=" ".join(notes))


def _send_each(
    name: str, context: dict[str, Any], headers: dict[str, str], to: list[RecipientStatus]
) -> list[TransportError]:
    """One message per address over one connection, each with its own stop link. An
    address refused for good is reported, not fatal; a refusal for now (or any other
    failure) is raised, and the whole notification is tried again."""
    refused: list[TransportError] = []
    timeout = getattr(settings, "EMAIL_TIMEOUT", None) or SMTP_TIMEOUT_S
    try:
        with get_connection(timeout=timeout) as connection:
            for status in to:
                assert status.recipient is not None
                links = recipient_links_context(status.recipient)
                message = _message(
                    name,
                    {**context, **links},
                    [status.address],
                    {**headers, **unsubscribe_headers(links)},
                    connection,
                )
                try:
                    message.send()
                except smtplib.SMTPRecipientsRefused as exc:
                    error = _refusal(exc)
                    if not error.permanent:
                        raise error from exc
                    refused.append(error)
    except (smtplib.SMTPException, OSError) as exc:
        raise _transport_error(exc) from exc
    if len(refused) == len(to):
        said = "; ".join(
            str(error).removeprefix("every recipient was refused: ") for error in refused
        )
        raise TransportError(f"every recipient was refused: {said}", permanent=True)
    return refused


def recipient_links_context(recipient: ChannelRecipient) -> dict[str, str]:
    return {
        "recipient_url": recipient_url(recipient),
        "unsubscribe_url": recipient_unsubscribe_url(recipient),
    }


def unsubscribe_headers(links: dict[str, str]) -> dict[str, str]:
    """RFC 8058: the mail client's own unsubscribe button, one POST, no page to open."""
    return {
        "List-Unsubscribe": f"<{links['unsubscribe_url']}>",
        "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
    }


def channels_page_url(channel: Channel) -> str:
    return settings.SITE_URL + reverse("alerts:channels", kwargs={"team_slug": channel.team.slug})


def channel_disabled_email(*, channel: Channel, recipients: list[str], reason: str) -> None:
    """Tell the team's owners which channel was disabled, why, and where to enable it.

    Raises TransportError when the mail cannot be sent.
    """
    context = {
        "channel": channel,
        "team": channel.team,
        "reason": reason,
        "channels_url": channels_page_url(channel),
    }
    _send(_message("channel-disabled", context, recipients, {}))


def confirmation_email_send(*, recipient: ChannelRecipient) -> None:
    """Ask an address whether it wants this channel's mail. The team's and channel's
    names go in only when the team's account is verified: otherwise the mail says only
    that someone asked to send it latency alerts from this site, and how to say no.

    Raises TransportError when the mail cannot be sent.
    """
    channel = recipient.channel
    assert channel is not None
    links = recipient_links_context(recipient)
    context = {
        **links,
        "named": account_verified(team=recipient.team),
        "team": recipient.team,
        "channel": channel,
        "address": recipient.email,
        "site": site_host(),
        "site_url": settings.SITE_URL,
        "expiry_days": settings.CHANNEL_CONFIRMATION_EXPIRY_DAYS,
    }
    _send(_message("channel-confirm", context, [recipient.email], unsubscribe_headers(links)))
