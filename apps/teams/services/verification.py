"""A user's e-mail address becomes verified when they show they read it.

Either they open a signed, expiring link mailed to it and press Verify while signed in
to their account (a POST: a mail scanner that follows links verifies nothing, and
someone who signed up with another person's address cannot get it verified by that
person's click), or they accept an invitation that was mailed to the address their
account has. Sign-up never waits for it: verification only unlocks mail to others.
"""

from django.conf import settings
from django.contrib.auth.models import User
from django.core import signing
from django.core.exceptions import ValidationError
from django.urls import reverse
from django.utils import timezone

from apps.teams.emails import verification_email_send
from apps.teams.models import EmailProof, EmailVerification
from apps.teams.ratelimit import RateExceeded, verification_send_consume, wait_words
from apps.teams.selectors import user_email_verified

_SALT = "teams.email-verification"


def email_verification_link(*, user: User) -> str:
    """A link for the address the user has now; it stops working if the address changes."""
    token = signing.dumps({"user": user.pk, "email": user.email.lower()}, salt=_SALT)
    return settings.SITE_URL + reverse("account_email_verify", kwargs={"token": token})


def email_verification_send(*, user: User) -> None:
    """Mail the user a verification link, within their hourly allowance."""
    if not user.email:
        raise ValidationError("Your account has no e-mail address to verify.", code="no_email")
    if user_email_verified(user=user):
        raise ValidationError(f"{user.email} is verified already.", code="verified")
    wait = verification_send_consume(user_id=user.pk)
    if wait:
        raise RateExceeded(
            "You asked for as many verification e-mails as allowed in an hour; try again "
            f"in {wait_words(wait)}.",
            retry_after_s=wait,
        )
    verification_email_send(user=user, url=email_verification_link(user=user))


def email_verification_check(*, user: User, token: str) -> None:
    """Raise ValidationError unless ``token`` is a live link for ``user``'s address."""
    max_age = settings.EMAIL_VERIFICATION_EXPIRY_HOURS * 3600
    try:
        data = signing.loads(token, salt=_SALT, max_age=max_age)
    except signing.SignatureExpired:
        raise ValidationError(
            "This link has expired; ask for a new one from your account page.", code="expired"
        ) from None
    except signing.BadSignature:
        raise ValidationError("This link is not valid.", code="invalid") from None
    if not isinstance(data, dict) or data.get("user") != user.pk:
        raise ValidationError(
            "This link was sent for another account: sign in to that one to verify it.",
            code="other_user",
        )
    if data.get("email") != user.email.lower():
        raise ValidationError(
            "This link was sent to an address your account no longer has; ask for a new one.",
            code="stale",
        )


def email_verification_confirm(*, user: User, token: str) -> EmailVerification:
    email_verification_check(user=user, token=token)
    return email_verification_record(user=user, proof=EmailProof.LINK)


def email_verification_record(*, user: User, proof: str) -> EmailVerification:
    """The user's present address is verified, by ``proof``."""
    verification, _ = EmailVerification.objects.update_or_create(
        user=user,
        defaults={"email": user.email.lower(), "proof": proof, "verified_at": timezone.now()},
    )
    return verification
