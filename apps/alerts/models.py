"""Channels, alert rules, their state per scope, incidents, notifications and delivery attempts.

A rule watches a pipeline's violations (or its objective's burn rate) and keeps one
``AlertState`` per scope it covers: ok, pending (the condition holds, not yet long
enough) or firing. Firing opens an ``Incident``; each transition that tells someone
(firing, a reminder, no data, resolved) writes one ``Notification`` per channel under
a unique idempotency key, and each try to send it is a ``DeliveryAttempt``. Each address
of an e-mail channel is a ``ChannelRecipient`` with its answer to the confirmation e-mail.
"""

from decimal import Decimal

from django.db import models
from django.db.models.functions import Lower

from apps.core.models import TimeStampedModel
from apps.teams.models import Team, slug_validator


class ChannelKind(models.TextChoices):
    EMAIL = "email", "email"
    WEBHOOK = "webhook", "webhook"


class WebhookFormat(models.TextChoices):
    NATIVE = "native", "native (Latency Budgets JSON)"
    ALERTMANAGER = "alertmanager", "Alertmanager webhook"
    SLACK = "slack", "Slack incoming webhook"


class Channel(TimeStampedModel):
    """Where notifications go: email addresses, or a webhook URL signed with ``secret``."""

    MAX_ADDRESSES = 20  # of an e-mail channel; checked by ``apps.alerts.channel_clean``

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="alert_channels")
    slug = models.CharField(max_length=50, validators=[slug_validator])
    name = models.CharField(max_length=100, blank=True)
    kind = models.CharField(max_length=10, choices=ChannelKind.choices)
    email_to = models.JSONField(default=list, blank=True, help_text="Addresses, for email.")
    url = models.CharField(max_length=2000, blank=True)
    format = models.CharField(
        max_length=20, choices=WebhookFormat.choices, default=WebhookFormat.NATIVE
    )
    # The Standard Webhooks signing secret, "whsec_" and base64. Set from the environment
    # variable named in ``secret_env`` when the configuration file is applied.
    secret = models.CharField(max_length=200, blank=True)
    secret_env = models.CharField(max_length=100, blank=True)
    disabled_at = models.DateTimeField(null=True, blank=True)
    disabled_reason = models.CharField(max_length=500, blank=True)
    # Permanent failures in a row; past the setting's count the channel is disabled.
    consecutive_failures = models.PositiveIntegerField(default=0)
    # Not stored: what the save that just ran has to say about the URL (its host does not
    # resolve now; see services.webhook_targets), for the door to pass on.
    url_warning = ""

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "slug"], name="channel_unique_team_slug")
        ]
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.name or self.slug

    @property
    def is_enabled(self) -> bool:
        return self.disabled_at is None

    @property
    def url_warning_list(self) -> list[str]:
        return [self.url_warning] if self.url_warning else []

    @property
    def target(self) -> str:
        """What the channel sends to, as shown to its team (never the secret)."""
        if self.kind == ChannelKind.EMAIL:
            return ", ".join(self.email_to)
        return self.url


class RecipientState(models.TextChoices):
    WAITING = "waiting", "waiting for confirmation"
    CONFIRMED = "confirmed", "confirmed"
    DECLINED = "declined", "declined"


class ChannelRecipient(models.Model):
    """An address of an e-mail channel and its answer to the confirmation e-mail.

    An address gets the confirmation and nothing else until it confirms (or belongs to a
    verified member of the team: ``apps.alerts.selectors.recipients``). A declined row
    outlives its channel (``channel`` set to null) and keeps the address declined for
    every channel its team's account makes later: someone who said no is not asked again
    by deleting the channel and making it anew.
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    channel = models.ForeignKey(
        Channel, null=True, blank=True, on_delete=models.SET_NULL, related_name="recipients"
    )
    email = models.EmailField(max_length=254)
    state = models.CharField(
        max_length=10, choices=RecipientState.choices, default=RecipientState.WAITING
    )
    created_at = models.DateTimeField()
    # When a confirmation e-mail is to be sent (null: none is). A sender claims it by
    # moving this past its lease, and clears it once sent; a failure sets the retry.
    confirmation_due_at = models.DateTimeField(null=True, blank=True)
    confirmation_sent_at = models.DateTimeField(null=True, blank=True)
    confirmation_failures = models.PositiveSmallIntegerField(default=0)
    confirmation_error = models.CharField(max_length=500, blank=True)
    answered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                Lower("email"),
                "channel",
                condition=models.Q(channel__isnull=False),
                name="channelrecipient_one_per_address",
            )
        ]
        indexes = [
            models.Index(
                "team",
                Lower("email"),
                condition=models.Q(state="declined"),
                name="channelrecipient_declined",
            ),
            models.Index(
                fields=["confirmation_due_at"],
                condition=models.Q(confirmation_due_at__isnull=False),
                name="channelrecipient_due",
            ),
        ]
        ordering = ["channel", "pk"]

    def __str__(self) -> str:
        return f"{self.email} on {self.channel_id}: {self.state}"


class RuleScope(models.TextChoices):
    E2E = "e2e", "end to end"
    ANY_STAGE = "any_stage", "any stage"
    STAGE = "stage", "one stage"


class ConditionKind(models.TextChoices):
    VIOLATION = "violation", "budget violation"
    BURN_RATE = "burn_rate", "objective burn rate"
    DEGRADATION = "degradation", "degradation rate"


class Severity(models.TextChoices):
    INFO = "info", "info"
    WARNING = "warning", "warning"
    CRITICAL = "critical", "critical"


class NoDataPolicy(models.TextChoices):
    RESOLVE = "resolve", "resolve"
    KEEP = "keep", "keep the state"
    NOTIFY = "notify", "notify “no data”"


class AlertRule(TimeStampedModel):
    """When to tell whom about one pipeline's budgets, objective or degradations.

    ``burn_windows`` lists ``{"long_s", "short_s", "factor", "severity"}`` pairs for
    burn-rate rules: the condition holds when the burn rate is at least ``factor`` over
    both windows of a pair (empty: the SRE workbook's three pairs). A degradation rule
    fires when at least ``degradation_percent`` of the requests in the evaluation window
    had a run-time client's decision (skip, fallback, hedge, cap, timeout) in scope, for
    ``violation_for_minutes``. ``no_data_after_s`` empty means three of the pipeline's
    evaluation windows.
    """

    # The bounds of the rule's numbers, checked by ``apps.alerts.rule_clean`` alone.
    MAX_VIOLATION_MINUTES = 1440
    MIN_FACTOR, MAX_FACTOR = 1, 100
    FACTOR_DECIMALS = 2
    MIN_DEGRADATION_PERCENT, MAX_DEGRADATION_PERCENT = Decimal("0.1"), Decimal(100)
    DEGRADATION_DECIMALS = 1
    MAX_RENOTIFY_MINUTES = 10080  # a week
    MIN_NO_DATA_AFTER_S, MAX_NO_DATA_AFTER_S = 30, 86400

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="alert_rules")
    pipeline = models.ForeignKey(
        "pipelines.Pipeline", on_delete=models.CASCADE, related_name="alert_rules"
    )
    slug = models.CharField(max_length=50, validators=[slug_validator])
    name = models.CharField(max_length=100, blank=True)
    scope = models.CharField(max_length=10, choices=RuleScope.choices, default=RuleScope.E2E)
    stage = models.ForeignKey(
        "pipelines.Stage", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    condition = models.CharField(
        max_length=20, choices=ConditionKind.choices, default=ConditionKind.VIOLATION
    )
    violation_for_minutes = models.PositiveIntegerField(default=0)
    violation_factor = models.DecimalField(
        max_digits=5,
        decimal_places=2,
        null=True,
        blank=True,
        help_text="Only when the percentile is at least this many times its budget.",
    )
    violation_percentile = models.CharField(
        max_length=3,
        blank=True,
        default="",
        help_text="Only the violations of this percentile's budget; empty: any percentile.",
    )
    burn_windows = models.JSONField(default=list, blank=True)
    degradation_percent = models.DecimalField(
        max_digits=4,
        decimal_places=1,
        null=True,
        blank=True,
        help_text="A degradation rule: the share of requests with a decision, in percent.",
    )
    severity = models.CharField(max_length=10, choices=Severity.choices, default=Severity.WARNING)
    channels = models.ManyToManyField(Channel, blank=True, related_name="rules")
    renotify_minutes = models.PositiveIntegerField(default=240, help_text="0: never remind.")
    notify_on_resolve = models.BooleanField(default=True)
    no_data = models.CharField(
        max_length=10, choices=NoDataPolicy.choices, default=NoDataPolicy.RESOLVE
    )
    no_data_after_s = models.PositiveIntegerField(null=True, blank=True)
    enabled = models.BooleanField(default=True)
    silenced_until = models.DateTimeField(null=True, blank=True)
    silence_reason = models.CharField(max_length=500, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "slug"], name="alertrule_unique_team_slug"),
            models.CheckConstraint(
                condition=models.Q(scope="stage", stage__isnull=False)
                | (~models.Q(scope="stage") & models.Q(stage__isnull=True)),
                name="alertrule_stage_only_for_stage_scope",
            ),
        ]
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.name or self.slug

    @property
    def scope_label(self) -> str:
        if self.scope == RuleScope.STAGE and self.stage is not None:
            return f"stage:{self.stage.slug}"
        return str(self.scope)


class AlertStatus(models.TextChoices):
    OK = "ok", "ok"
    PENDING = "pending", "pending"
    FIRING = "firing", "firing"


class AlertState(models.Model):
    """A rule's state for one scope: ``e2e``, ``stage:<id>`` or ``objective``."""

    rule = models.ForeignKey(AlertRule, on_delete=models.CASCADE, related_name="states")
    scope_key = models.CharField(max_length=40)
    status = models.CharField(max_length=10, choices=AlertStatus.choices, default=AlertStatus.OK)
    # When the condition began to hold (pending and firing), and when the status began.
    condition_since = models.DateTimeField(null=True, blank=True)
    changed_at = models.DateTimeField()
    incident = models.ForeignKey(
        "Incident", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    evaluated_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["rule", "scope_key"], name="alertstate_unique_scope")
        ]

    def __str__(self) -> str:
        return f"rule {self.rule_id} {self.scope_key}: {self.status}"


class Resolution(models.TextChoices):
    RECOVERED = "recovered", "recovered"
    NO_DATA = "no_data", "no data"
    RULE_CHANGED = "rule_changed", "rule changed or removed"


class Incident(models.Model):
    """One firing of a rule for one scope, from the moment it fired until it resolved.

    ``facts`` holds what the notifications say: observed and budget, the window, the top
    stages by critical-path share and example traces, as when it fired (updated to the
    worst seen while firing). The rule's slug and name are kept for when it is gone.
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    rule = models.ForeignKey(
        AlertRule, null=True, blank=True, on_delete=models.SET_NULL, related_name="incidents"
    )
    rule_slug = models.CharField(max_length=50)
    rule_name = models.CharField(max_length=100, blank=True)
    pipeline = models.ForeignKey(
        "pipelines.Pipeline", on_delete=models.CASCADE, related_name="incidents"
    )
    stage = models.ForeignKey(
        "pipelines.Stage", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    scope_key = models.CharField(max_length=40)
    severity = models.CharField(max_length=10, choices=Severity.choices)
    started_at = models.DateTimeField()
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolution = models.CharField(max_length=20, choices=Resolution.choices, blank=True)
    facts = models.JSONField(default=dict)
    # Reminders sent so far, when the last firing notification went out, and whether any did
    # (a rule silenced when it fired tells nobody, and then tells nobody it resolved).
    reminders = models.PositiveIntegerField(default=0)
    notified_at = models.DateTimeField(null=True, blank=True)
    announced = models.BooleanField(default=False)
    no_data_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["rule", "scope_key"],
                condition=models.Q(resolved_at__isnull=True),
                name="incident_one_open_per_scope",
            )
        ]
        indexes = [models.Index(fields=["team", "-started_at"], name="incident_team_started")]
        ordering = ["-started_at", "-id"]

    def __str__(self) -> str:
        return f"{self.rule_slug} {self.scope_key} since {self.started_at:%Y-%m-%d %H:%M}"

    @property
    def is_open(self) -> bool:
        return self.resolved_at is None


class NotificationEvent(models.TextChoices):
    FIRING = "firing", "firing"
    REMINDER = "reminder", "still firing"
    NO_DATA = "no_data", "no data"
    RESOLVED = "resolved", "resolved"
    TEST = "test", "test"


class NotificationStatus(models.TextChoices):
    PENDING = "pending", "pending"
    DELIVERED = "delivered", "delivered"
    FAILED = "failed", "failed"
    CANCELLED = "cancelled", "cancelled"


class Notification(models.Model):
    """One message to one channel. ``key`` is unique: a transition writes it once per channel.

    ``payload`` is frozen when the notification is written, so every retry sends the
    same body under the same ``message_id`` (the ``webhook-id`` header).
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    channel = models.ForeignKey(Channel, on_delete=models.CASCADE, related_name="notifications")
    incident = models.ForeignKey(
        Incident, null=True, blank=True, on_delete=models.CASCADE, related_name="notifications"
    )
    event = models.CharField(max_length=10, choices=NotificationEvent.choices)
    key = models.CharField(max_length=200, unique=True)
    message_id = models.CharField(max_length=40, unique=True)
    payload = models.JSONField()
    status = models.CharField(
        max_length=10, choices=NotificationStatus.choices, default=NotificationStatus.PENDING
    )
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField()
    # Held by the worker sending it; another may take it over once this has passed.
    lease_until = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    last_error = models.CharField(max_length=1000, blank=True)

    class Meta:
        indexes = [
            models.Index(
                fields=["next_attempt_at"],
                name="notification_due",
                condition=models.Q(status="pending"),
            ),
            models.Index(fields=["channel", "-created_at"], name="notification_channel_recent"),
        ]
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.event} to {self.channel_id} ({self.status})"


class AttemptOutcome(models.TextChoices):
    SENDING = "sending", "sending"
    SUCCESS = "success", "success"
    RETRY = "retry", "failed, will retry"
    PERMANENT = "permanent", "failed permanently"
    SKIPPED = "skipped", "skipped: nobody confirmed"


class DeliveryAttempt(models.Model):
    """One try to send a notification, written before sending and completed after."""

    notification = models.ForeignKey(
        Notification, on_delete=models.CASCADE, related_name="delivery_attempts"
    )
    number = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    outcome = models.CharField(
        max_length=10, choices=AttemptOutcome.choices, default=AttemptOutcome.SENDING
    )
    http_status = models.PositiveSmallIntegerField(null=True, blank=True)
    latency_ms = models.FloatField(null=True, blank=True)
    error = models.CharField(max_length=1000, blank=True)
    response_excerpt = models.TextField(blank=True)
    # What the transport says of a delivery besides its outcome: addresses it left out.
    note = models.CharField(max_length=1000, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["notification", "number"], name="deliveryattempt_unique_number"
            )
        ]
        ordering = ["notification", "number"]

    def __str__(self) -> str:
        return f"attempt {self.number} of {self.notification_id}: {self.outcome}"
