"""E-mail: subject, text and HTML from templates/emails/, sent by Django's mail backend.

SMTP says itself whether trying again can help: 5xx replies are permanent, 4xx ones
and a server that cannot be reached are not.
"""

import smtplib
from email.utils import parseaddr
from typing import Any, cast
from urllib.parse import urlsplit

from django.conf import settings
from django.core.mail import EmailMultiAlternatives, get_connection
from django.template.loader import render_to_string

from apps.alerts.formats import text
from apps.alerts.models import Channel, Notification
from apps.alerts.payload_types import Payload
from apps.alerts.transports.base import Delivered, TransportError

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
        "percentile": payload["percentile"],
        "observed": text.ms(payload["observed_ms"]),
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
    }


def _message(
    name: str, context: dict[str, Any], to: list[str], headers: dict[str, str]
) -> EmailMultiAlternatives:
    # Newlines in a subject would end the header: the template's are folded away.
    subject = " ".join(render_to_string(f"emails/{name}-subject.txt", context).split())
    body = render_to_string(f"emails/{name}-body.txt", context)
    html = render_to_string(f"emails/{name}-body.html", context)
    timeout = getattr(settings, "EMAIL_TIMEOUT", None) or SMTP_TIMEOUT_S
    message = EmailMultiAlternatives(
        subject,
        body,
        settings.DEFAULT_FROM_EMAIL,
        to,
        headers={"Auto-Submitted": "auto-generated", **headers},
        connection=get_connection(timeout=timeout),
    )
    message.attach_alternative(html, "text/html")
    return message


def _refusal(exc: smtplib.SMTPRecipientsRefused) -> TransportError:
    codes = [code for code, _ in exc.recipients.values()]
    said = "; ".join(
        f"{address}: {code} {reply.decode(errors='replace')}"
        for address, (code, reply) in exc.recipients.items()
    )
    # A 4xx refusal (a full mailbox, greylisting) may pass later; 5xx ones will not.
    permanent = all(code >= 500 for code in codes)
    return TransportError(f"every recipient was refused: {said}", permanent=permanent)


def _send(message: EmailMultiAlternatives) -> None:
    try:
        message.send()
    except smtplib.SMTPRecipientsRefused as exc:
        raise _refusal(exc) from exc
    except (smtplib.SMTPServerDisconnected, smtplib.SMTPConnectError) as exc:
        raise TransportError(f"SMTP server unreachable: {exc}", permanent=False) from exc
    except smtplib.SMTPResponseException as exc:
        reply = (
            exc.smtp_error.decode(errors="replace")
            if isinstance(exc.smtp_error, bytes)
            else exc.smtp_error
        )
        raise TransportError(
            f"SMTP {exc.smtp_code} {reply}", permanent=500 <= exc.smtp_code < 600
        ) from exc
    except (smtplib.SMTPException, OSError) as exc:
        # Refused connections, timeouts, TLS failures: the server may be back soon.
        raise TransportError(f"{type(exc).__name__}: {exc}", permanent=False) from exc


class EmailTransport:
    def notify(self, *, channel: Channel, notification: Notification, timestamp: int) -> Delivered:
        """Mail ``channel.email_to``; the Message-ID is the same on every retry, so a
        message that did arrive before a failure shows once in a mail client."""
        payload = cast(Payload, notification.payload)
        headers = {
            "Message-ID": f"<{notification.message_id}@{_domain()}>",
            "X-Latency-Budgets-Message-Id": notification.message_id,
        }
        context = alert_context(channel, payload)
        _send(_message("alert", context, list(channel.email_to), headers))
        return Delivered()


def channels_page_url(channel: Channel) -> str:
    return f"{settings.SITE_URL}/teams/{channel.team.slug}/alerts/channels/"


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
