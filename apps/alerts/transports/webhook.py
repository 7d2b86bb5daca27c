"""Webhooks: the body in the channel's format, Standard Webhooks headers, a guarded POST."""

from typing import cast

from apps.alerts.formats import render
from apps.alerts.models import Channel, Notification
from apps.alerts.payload_types import Payload
from apps.alerts.transports.base import Delivered, TransportError
from apps.alerts.transports.guarded_http import RequestFailed, RequestRefused, guarded_post
from apps.alerts.transports.signing import signature_headers

USER_AGENT = "LatencyBudgets-Webhook/1"
# 4xx answers that mean "not now" rather than "never": timeout, rate limit.
RETRYABLE_4XX = frozenset({408, 429})
GONE = 410


class WebhookTransport:
    def notify(self, *, channel: Channel, notification: Notification, timestamp: int) -> Delivered:
        """POST once; 2xx is delivered, 408/429/5xx and network trouble are worth a retry,
        any other answer (redirects included) is permanent, and 410 disables the channel."""
        payload = cast(Payload, notification.payload)
        body, content_type = render(channel, payload)
        try:
            signed = signature_headers(
                secret=channel.secret,
                message_id=notification.message_id,
                timestamp=timestamp,
                body=body,
            )
        except ValueError as exc:
            raise TransportError(str(exc), permanent=True) from exc
        headers = {"Content-Type": content_type, "User-Agent": USER_AGENT, **signed}
        try:
            answer = guarded_post(
                channel.url, body=body, headers=headers, team_slug=channel.team.slug
            )
        except RequestRefused as exc:
            raise TransportError(str(exc), permanent=True) from exc
        except RequestFailed as exc:
            raise TransportError(str(exc), permanent=False) from exc
        status, excerpt = answer.status, answer.excerpt
        if 200 <= status < 300:
            return Delivered(http_status=status, excerpt=excerpt)
        if 300 <= status < 400:
            raise TransportError(
                f"HTTP {status}: redirects are not followed "
                f"(Location: {answer.location or 'none given'})",
                permanent=True,
                http_status=status,
                excerpt=excerpt,
            )
        retryable = status >= 500 or status in RETRYABLE_4XX
        raise TransportError(
            f"HTTP {status}"
            + (" Gone: the receiver says this URL is no more" if status == GONE else ""),
            permanent=not retryable,
            http_status=status,
            excerpt=excerpt,
            disable=status == GONE,
        )
