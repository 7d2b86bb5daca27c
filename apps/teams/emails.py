"""The invitation e-mail: subject, text and HTML from templates/emails/invitation-*."""

import logging
import smtplib
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.mail import EmailMultiAlternatives, get_connection
from django.template.loader import render_to_string
from django.urls import reverse

from apps.teams.models import Invitation

logger = logging.getLogger(__name__)

# A slow SMTP server must not hold an owner's request for long.
SMTP_TIMEOUT_S = 10


def invitation_url(raw_token: str) -> str:
    return settings.SITE_URL + reverse("invitation", kwargs={"token": raw_token})


def invitation_email_send(*, invitation: Invitation, raw_token: str) -> None:
    """Send the link; a failure is a ValidationError for the owner to retry later."""
    context: dict[str, Any] = {
        "team": invitation.team,
        "inviter": invitation.invited_by.get_username() if invitation.invited_by else "",
        "role": invitation.get_role_display().lower(),
        "accept_url": invitation_url(raw_token),
        "expires_at": invitation.expires_at,
        "site_url": settings.SITE_URL,
    }
    # Newlines in a subject would end the header: the template's are folded away.
    subject = " ".join(render_to_string("emails/invitation-subject.txt", context).split())
    message = EmailMultiAlternatives(
        subject,
        render_to_string("emails/invitation-body.txt", context),
        settings.DEFAULT_FROM_EMAIL,
        [invitation.email],
        headers={"Auto-Submitted": "auto-generated"},
        connection=get_connection(
            timeout=getattr(settings, "EMAIL_TIMEOUT", None) or SMTP_TIMEOUT_S
        ),
    )
    message.attach_alternative(
        render_to_string("emails/invitation-body.html", context), "text/html"
    )
    try:
        message.send()
    except (smtplib.SMTPException, OSError) as exc:
        logger.warning(
            "Invitation %s to team %s not sent: %s", invitation.pk, invitation.team_id, exc
        )
        raise ValidationError(
            "The invitation e-mail could not be sent; try again in a few minutes.",
            code="not_sent",
        ) from exc
