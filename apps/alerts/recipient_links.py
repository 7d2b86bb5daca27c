"""The link a channel's address gets in every e-mail: confirm, decline, stop.

A signed token of the recipient row (Django's signing, with SECRET_KEY): holding it is
the proof of reading that mailbox. It confirms for CHANNEL_CONFIRMATION_EXPIRY_DAYS
after it was made; it declines, or stops the mail, for ever.
"""

from dataclasses import dataclass

from django.conf import settings
from django.core import signing
from django.urls import reverse

from apps.alerts.models import ChannelRecipient

_SALT = "alerts.channel-recipient"


def recipient_token(recipient: ChannelRecipient) -> str:
    return signing.dumps(recipient.pk, salt=_SALT)


def recipient_url(recipient: ChannelRecipient) -> str:
    """The page with the buttons (GET shows them; only a POST changes anything)."""
    return settings.SITE_URL + reverse("recipient", kwargs={"token": recipient_token(recipient)})


def recipient_unsubscribe_url(recipient: ChannelRecipient) -> str:
    """RFC 8058 one-click unsubscribe: the mail client POSTs to it, and it declines."""
    return settings.SITE_URL + reverse(
        "recipient_unsubscribe", kwargs={"token": recipient_token(recipient)}
    )


@dataclass(frozen=True)
class RecipientLink:
    recipient: ChannelRecipient
    # Young enough to confirm with; any valid link declines.
    fresh: bool


def recipient_by_token(token: str) -> RecipientLink | None:
    """The recipient a link was made for, or None for anything else (or a row gone)."""
    max_age = settings.CHANNEL_CONFIRMATION_EXPIRY_DAYS * 86400
    try:
        pk, fresh = signing.loads(token, salt=_SALT, max_age=max_age), True
    except signing.SignatureExpired:
        pk, fresh = signing.loads(token, salt=_SALT), False
    except signing.BadSignature:
        return None
    if not isinstance(pk, int):
        return None
    recipient = ChannelRecipient.objects.select_related("channel", "team").filter(pk=pk).first()
    return RecipientLink(recipient, fresh) if recipient is not None else None
