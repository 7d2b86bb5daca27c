"""Helpers of the invitation tests: invite through the service, read links from mail."""

import re

from django.core import mail
from django.urls import reverse

from apps.teams.models import Invitation, Membership, Role, Team
from apps.teams.services import invitation_create

LINK = re.compile(r"https?://\S+/accounts/invitations/([^/\s]+)/")


def invite(team: Team, email: str, *, by=None, role: str = Role.VIEWER) -> tuple[Invitation, str]:
    return invitation_create(team=team, email=email, role=role, invited_by=by)


def link(raw: str) -> str:
    return reverse("invitation", kwargs={"token": raw})


def mailed_to(address: str, pattern: re.Pattern[str]) -> list[str]:
    """What ``pattern`` finds in the text of every e-mail to ``address``, oldest first."""
    return [
        match
        for message in mail.outbox
        if address in message.to
        for match in pattern.findall(str(message.body))
    ]


def tokens_mailed_to(address: str) -> list[str]:
    """The tokens of every invitation link e-mailed to ``address``, oldest first."""
    return mailed_to(address, LINK)


def role_in(team: Team, user) -> str | None:
    membership = Membership.objects.filter(team=team, user=user).first()
    return membership.role if membership else None
