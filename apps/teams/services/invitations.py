"""Invitations: an owner offers a role to an e-mail address; the invitee accepts.

Whether an account with the address exists plays no part in any answer, so the
form cannot be used to find out who has an account. Nothing is attached until
someone signed in opens the link and accepts it; holding the link is the proof, as
with the invitations of GitHub organisations, Sentry and Grafana, so the accepting
account's address need not match. When it does match, accepting also verifies it: the
link was mailed there.
"""

import math
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.teams.accounts import account_rate_take
from apps.teams.emails import invitation_email_send
from apps.teams.models import EmailProof, Invitation, InvitationStatus, Membership, Role, Team
from apps.teams.ratelimit import invitation_send_consume
from apps.teams.services.teams import membership_default_settle
from apps.teams.services.verification import email_verification_record
from apps.teams.tokens import token_digest, token_generate

EMAIL_MAX_CHARS = 254  # the longest address SMTP carries (RFC 5321 path limit)
INVITATION_TOKEN_PREFIX = ""  # links carry the bare token; nothing else reads it


def _clean_email(email: str) -> str:
    email = email.strip()
    if len(email) > EMAIL_MAX_CHARS:
        raise ValidationError({"email": f"Use an address of at most {EMAIL_MAX_CHARS} characters."})
    try:
        validate_email(email)
    except ValidationError:
        raise ValidationError({"email": "Enter a valid e-mail address."}) from None
    return User.objects.normalize_email(email)


def _expiry(now: datetime) -> datetime:
    return now + timedelta(days=settings.INVITATION_EXPIRY_DAYS)


def _send_allowance(sender: User | None, team: Team) -> None:
    """The inviting user's hourly allowance, then the team's account's, which all the
    teams an account created share."""
    if sender is not None:
        wait = invitation_send_consume(user_id=sender.pk)
        if wait:
            raise ValidationError(
                "You sent as many invitations as allowed in an hour; "
                f"try again in {math.ceil(wait / 60)} minutes.",
                code="throttled",
            )
    account_rate_take(team=team, what="invitation e-mails", setting="ACCOUNT_INVITATIONS_PER_HOUR")


@transaction.atomic
def invitation_create(
    *, team: Team, email: str, role: str, invited_by: User | None, throttled: bool = True
) -> tuple[Invitation, str]:
    """Store an invitation and e-mail its link; returns it with the link's plain token.

    ``throttled`` holds the inviter to INVITATION_SENDS_PER_HOUR and the team's account
    to ACCOUNT_INVITATIONS_PER_HOUR; only an operator's command passes False.

    Sending happens inside the transaction: an invitation whose e-mail failed is
    not kept, and the owner is told to try again.
    """
    email = _clean_email(email)
    if role not in Role.values:
        raise ValidationError({"role": f"Unknown role “{role}”."})
    # Owners see their members' addresses anyway: saying so discloses nothing.
    if Membership.objects.filter(team=team, user__email__iexact=email).exists():
        raise ValidationError({"email": f"{email} is already a member of {team}."})
    if Invitation.objects.filter(
        team=team, email__iexact=email, accepted_at__isnull=True, revoked_at__isnull=True
    ).exists():
        raise ValidationError(
            {"email": f"{email} is already invited; resend the invitation from the list."}
        )
    if throttled:
        _send_allowance(invited_by, team)
    now = timezone.now()
    raw = token_generate(INVITATION_TOKEN_PREFIX)
    invitation = Invitation(
        team=team,
        email=email,
        role=role,
        invited_by=invited_by,
        digest=token_digest(raw),
        sent_at=now,
        expires_at=_expiry(now),
    )
    try:
        with transaction.atomic():
            invitation.save()
    except IntegrityError:  # the same address invited at the same moment
        raise ValidationError({"email": f"{email} is already invited."}) from None
    invitation_email_send(invitation=invitation, raw_token=raw)
    return invitation, raw


@transaction.atomic
def invitation_resend(*, invitation: Invitation, sent_by: User | None) -> str:
    """Send a fresh link (the old one stops working) with a new expiry; returns its token.

    At most once per INVITATION_RESEND_INTERVAL_S per invitation, claimed by a
    conditional update so that two clicks send one e-mail.
    """
    now = timezone.now()
    interval = timedelta(seconds=settings.INVITATION_RESEND_INTERVAL_S)
    raw = token_generate(INVITATION_TOKEN_PREFIX)
    claimed = Invitation.objects.filter(
        pk=invitation.pk,
        accepted_at__isnull=True,
        revoked_at__isnull=True,
        sent_at__lte=now - interval,
    ).update(digest=token_digest(raw), sent_at=now, expires_at=_expiry(now), updated_at=now)
    if not claimed:
        invitation.refresh_from_db()
        if not invitation.is_open:
            raise ValidationError("This invitation was already accepted or revoked.")
        minutes = max(1, math.ceil(interval.total_seconds() / 60))
        raise ValidationError(
            f"The invitation to {invitation.email} was sent less than {minutes} minutes ago; "
            "wait before sending it again.",
            code="throttled",
        )
    invitation.refresh_from_db()
    _send_allowance(sent_by, invitation.team)
    invitation_email_send(invitation=invitation, raw_token=raw)
    return raw


def invitation_revoke(*, invitation: Invitation) -> Invitation:
    now = timezone.now()
    revoked = Invitation.objects.filter(
        pk=invitation.pk, accepted_at__isnull=True, revoked_at__isnull=True
    ).update(revoked_at=now, updated_at=now)
    invitation.refresh_from_db()
    if not revoked:
        raise ValidationError("This invitation was already accepted or revoked.")
    return invitation


CLOSED_MESSAGES = {
    InvitationStatus.ACCEPTED: "This invitation was already accepted; a link works once.",
    InvitationStatus.REVOKED: "This invitation was withdrawn by the team's owners.",
    InvitationStatus.EXPIRED: "This invitation has expired; ask the team's owners for a new one.",
}


@transaction.atomic
def invitation_accept(*, invitation: Invitation, user: User) -> Membership:
    """The signed-in ``user`` joins the team with the invitation's role; once only."""
    locked = Invitation.objects.select_for_update().select_related("team").get(pk=invitation.pk)
    status = locked.status
    if status != InvitationStatus.PENDING:
        raise ValidationError(CLOSED_MESSAGES[status], code=status.value)
    if Membership.objects.filter(team=locked.team, user=user).exists():
        raise ValidationError(f"You are already a member of {locked.team}.", code="member")
    locked.accepted_at = timezone.now()
    locked.accepted_by = user
    locked.save(update_fields=["accepted_at", "accepted_by", "updated_at"])
    membership = Membership.objects.create(team=locked.team, user=user, role=locked.role)
    membership_default_settle(membership=membership)
    if user.email and user.email.lower() == locked.email.lower():
        email_verification_record(user=user, proof=EmailProof.INVITATION)
    invitation.accepted_at, invitation.accepted_by = locked.accepted_at, user
    return membership
