"""Mail of the teams app: invitations and address verification, from templates/emails/."""

import logging
import smtplib
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.urls import reverse

from apps.core.mail import mail_build, site_host
from apps.teams.accounts import account_verified
from apps.teams.models import Invitation

logger = logging.getLogger(__name__)

# A slow SMTP server must not hold a user's request for long.
SMTP_TIMEOUT_S = 10


def invitation_url(raw_token: str) -> str:
    return settings.SITE_URL + reverse("invitation", kwargs={"token": raw_token})


def _send(name: str, context: dict[str, Any], to: str, *, failure: str) -> None:
    """Send now; a failure is a ValidationError for the user to retry later."""
    message = mail_build(name, context, [to], timeout=SMTP_TIMEOUT_S)
    try:
        message.send()
    except (smtplib.SMTPException, OSError) as exc:
        logger.warning("%s e-mail not sent: %s", name, exc)
        raise ValidationError(failure, code="not_sent") from exc


def invitation_email_send(*, invitation: Invitation, raw_token: str) -> None:
    """Send the link. The team's name and the inviter's go in only when the team's
    account is verified: an address that never asked must not carry a stranger's text."""
    context: dict[str, Any] = {
        "named": account_verified(team=invitation.team),
        "team": invitation.team,
        "inviter": invitation.invited_by.get_username() if invitation.invited_by else "",
        "role": invitation.get_role_display().lower(),
        "accept_url": invitation_url(raw_token),
        "expires_at": invitation.expires_at,
        "site_url": settings.SITE_URL,
        "site": site_host(),
    }
    failure = "The invitation e-mail could not be sent; try again in a few minutes."
    _send("invitation", context, invitation.email, failure=failure)


def verification_email_send(*, user: User, url: str) -> None:
    # No username: whoever signs up chooses it, and the address has not asked for mail yet.
    context = {
        "verify_url": url,
        "expiry_hours": settings.EMAIL_VERIFICATION_EXPIRY_HOURS,
        "site_url": settings.SITE_URL,
        "site": site_host(),
    }
    failure = "The verification e-mail could not be sent; try again in a few minutes."
    _send("verify-email", context, user.email, failure=failure)
