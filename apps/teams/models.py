from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models
from django.db.models.functions import Lower
from django.utils import timezone

from apps.core.models import TimeStampedModel

slug_validator = RegexValidator(
    r"^[a-z0-9](?:[a-z0-9-]{0,48}[a-z0-9])?$",
    "Use up to 50 lowercase letters, digits and hyphens; start and end with a letter or digit.",
)


class Role(models.TextChoices):
    OWNER = "owner", "Owner"
    EDITOR = "editor", "Editor"
    VIEWER = "viewer", "Viewer"


class Team(TimeStampedModel):
    slug = models.CharField(max_length=50, unique=True, validators=[slug_validator])
    name = models.CharField(max_length=100)
    # The user account whose allowances the team draws on (apps/teams/accounts.py): the
    # one that created it. None for a team an operator made on the server, which is an
    # account of its own.
    account = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="accounted_teams",
    )
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, through="Membership", related_name="teams"
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Membership(TimeStampedModel):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.VIEWER)
    # The team the user works in when nothing names one: the API without ?team= and the
    # landing page after sign-in. Only the user's own choice changes it, so being added
    # to someone else's team never moves them.
    is_default = models.BooleanField(default=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "user"], name="membership_unique_team_user"),
            models.UniqueConstraint(
                fields=["user"],
                condition=models.Q(is_default=True),
                name="membership_one_default_per_user",
            ),
        ]
        ordering = ["team__name", "user__username"]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} as {self.role}"

    @property
    def can_write(self) -> bool:
        return self.role in (Role.OWNER, Role.EDITOR)

    @property
    def is_owner(self) -> bool:
        return self.role == Role.OWNER


class BearerToken(TimeStampedModel):
    """A random bearer token: only its SHA-256 digest is stored; the token is shown once."""

    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=12, help_text="First characters, to recognise a token.")
    digest = models.CharField(max_length=64, unique=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class ApiToken(BearerToken):
    """A personal API token, read and write with its owner's rights."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    # None: until revoked. Changing the owner's password revokes it too.
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_reason = models.CharField(max_length=100, blank=True)

    @property
    def is_expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= timezone.now()

    @property
    def is_usable(self) -> bool:
        return self.is_active and not self.is_expired

    class Meta(BearerToken.Meta):
        pass


class IngestToken(BearerToken):
    """A team's write-only token for sending spans."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="ingest_tokens")
    # Kept when its creator leaves or is deleted: the collectors using it must keep working.
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )

    class Meta(BearerToken.Meta):
        pass


class MetricsToken(BearerToken):
    """A team's read-only token for Prometheus scrapes of ``/metrics``.

    A team credential like an ingest token, not a person's: a scrape job must keep
    working when the member who set it up leaves, and a leaked one shows only the
    team's aggregated figures, never a trace, and changes nothing.
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="metrics_tokens")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )

    class Meta(BearerToken.Meta):
        pass


class InvitationStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    ACCEPTED = "accepted", "Accepted"
    REVOKED = "revoked", "Revoked"
    EXPIRED = "expired", "Expired"


class Invitation(TimeStampedModel):
    """An owner's offer of a role in a team, sent to an e-mail address.

    Nothing is attached until someone signed in opens the link and accepts: holding
    the link is the proof. Only the SHA-256 digest of the link's token is stored.
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="invitations")
    email = models.EmailField(max_length=254)
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.VIEWER)
    invited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    digest = models.CharField(max_length=64, unique=True)
    sent_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    accepted_at = models.DateTimeField(null=True, blank=True)
    accepted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            # One open invitation per address and team: inviting again means resending.
            models.UniqueConstraint(
                Lower("email"),
                "team",
                condition=models.Q(accepted_at__isnull=True, revoked_at__isnull=True),
                name="invitation_one_open_per_email",
            )
        ]
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.email} to {self.team} as {self.role}"

    @property
    def status(self) -> InvitationStatus:
        if self.accepted_at is not None:
            return InvitationStatus.ACCEPTED
        if self.revoked_at is not None:
            return InvitationStatus.REVOKED
        if self.expires_at <= timezone.now():
            return InvitationStatus.EXPIRED
        return InvitationStatus.PENDING

    @property
    def is_open(self) -> bool:
        """Neither accepted nor revoked: listed to owners, who may resend or revoke it."""
        return self.accepted_at is None and self.revoked_at is None


class EmailProof(models.TextChoices):
    LINK = "link", "a link mailed to it"
    INVITATION = "invitation", "an invitation mailed to it"
    # The demo's own user: its address is the demo channel's, which nobody reads.
    DEMO = "demo", "the demo's set-up"


class EmailVerification(TimeStampedModel):
    """The address a user showed they read: they opened a signed link mailed to it, or
    accepted an invitation that was mailed to it.

    The user counts as verified only while their address is still this one (compared
    lowercased), so a change of address, by whoever makes it, unverifies them.
    """

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="email_verification"
    )
    # Lowercased: the address is compared, never shown from here.
    email = models.EmailField(max_length=254)
    proof = models.CharField(max_length=12, choices=EmailProof.choices)
    verified_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.email} of {self.user} ({self.proof})"
