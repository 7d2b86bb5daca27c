"""One way to build an e-mail from templates/emails/<name>-subject.txt, -body.txt and
-body.html, for every app that sends mail."""

from typing import Any

from django.conf import settings
from django.core.mail import EmailMultiAlternatives, get_connection
from django.template.loader import render_to_string


def mail_build(
    name: str,
    context: dict[str, Any],
    to: list[str],
    *,
    timeout: float,
    headers: dict[str, str] | None = None,
    connection: Any = None,
) -> EmailMultiAlternatives:
    """The message, sent as automatic mail (``Auto-Submitted`` keeps auto-responders
    quiet); ``timeout`` is used when EMAIL_TIMEOUT is unset."""
    # Newlines in a subject would end the header: the template's are folded away.
    subject = " ".join(render_to_string(f"emails/{name}-subject.txt", context).split())
    message = EmailMultiAlternatives(
        subject,
        render_to_string(f"emails/{name}-body.txt", context),
        settings.DEFAULT_FROM_EMAIL,
        to,
        headers={"Auto-Submitted": "auto-generated", **(headers or {})},
        connection=connection
        or get_connection(timeout=getattr(settings, "EMAIL_TIMEOUT", None) or timeout),
    )
    message.attach_alternative(render_to_string(f"emails/{name}-body.html", context), "text/html")
    return message


def site_host() -> str:
    """The site as a recipient knows it, for mail that may name nothing else."""
    return settings.SITE_URL.split("://", 1)[-1].split("/", 1)[0]
