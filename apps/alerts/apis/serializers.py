"""Serializers of the alerts API's answers: channels, rules, incidents."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.alerts.apis.fields import ConditionField
from apps.alerts.models import (
    AlertStatus,
    AttemptOutcome,
    ChannelKind,
    Incident,
    NoDataPolicy,
    NotificationEvent,
    NotificationStatus,
    RecipientState,
    Resolution,
    Severity,
    WebhookFormat,
)
from apps.alerts.services.payloads import incident_summary

# --- Channels --------------------------------------------------------------------------------


class DeliveryAttemptOutput(serializers.Serializer):
    number = serializers.IntegerField()
    started_at = serializers.DateTimeField()
    outcome = serializers.ChoiceField(choices=AttemptOutcome.choices)
    http_status = serializers.IntegerField(allow_null=True)
    latency_ms = serializers.FloatField(allow_null=True)
    error = serializers.CharField()
    response_excerpt = serializers.CharField(help_text="The start of the receiver's answer.")
    note = serializers.CharField(
        help_text="What else the transport said: the e-mail addresses it left out, and why."
    )

    class Meta:
        ref_name = "DeliveryAttempt"


class NotificationOutput(serializers.Serializer):
    id = serializers.IntegerField()
    channel = serializers.CharField(source="channel.slug")
    incident = serializers.IntegerField(source="incident_id", allow_null=True)
    event = serializers.ChoiceField(choices=NotificationEvent.choices)
    status = serializers.ChoiceField(choices=NotificationStatus.choices)
    message_id = serializers.CharField(help_text="Also the webhook-id header.")
    attempts = serializers.IntegerField(help_text="Attempts made so far.")
    created_at = serializers.DateTimeField()
    next_attempt_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    last_error = serializers.CharField()
    delivery_attempts = DeliveryAttemptOutput(many=True)

    class Meta:
        ref_name = "Notification"


class RecipientOutput(serializers.Serializer):
    """An address of an e-mail channel and whether it receives the channel's mail."""

    address = serializers.CharField()
    state = serializers.ChoiceField(
        choices=RecipientState.choices,
        help_text="waiting: mailed a confirmation, receives nothing else until it confirms; "
        "confirmed: receives the channel's mail; declined: receives nothing more.",
    )
    verified_member = serializers.BooleanField(
        source="by_membership",
        help_text="Confirmed because it is the address of a team member who is a verified user.",
    )
    confirmation_sent_at = serializers.DateTimeField(
        allow_null=True, help_text="When its last confirmation e-mail went out."
    )
    confirmation_error = serializers.CharField(
        help_text="Why its last confirmation e-mail could not be sent, if it could not."
    )

    class Meta:
        ref_name = "ChannelRecipient"


class ChannelOutput(serializers.Serializer):
    """A channel as ``views.labels.ChannelRow`` shows it to the caller."""

    slug = serializers.CharField(source="channel.slug")
    name = serializers.CharField(source="channel.name")
    kind = serializers.ChoiceField(source="channel.kind", choices=ChannelKind.choices)
    email_to = serializers.ListField(source="channel.email_to", child=serializers.CharField())
    recipients = RecipientOutput(
        many=True,
        help_text="For e-mail channels: each address with its state. Only confirmed ones "
        "receive alerts, reminders, resolutions and tests.",
    )
    url = serializers.CharField(
        help_text="Viewers see the scheme and host only: webhook URLs often carry a token."
    )
    format = serializers.ChoiceField(source="channel.format", choices=WebhookFormat.choices)
    secret_env = serializers.CharField(
        source="channel.secret_env",
        help_text="The environment variable the configuration file takes the secret from.",
    )
    enabled = serializers.BooleanField(source="channel.is_enabled")
    disabled_at = serializers.DateTimeField(source="channel.disabled_at", allow_null=True)
    disabled_reason = serializers.CharField(source="channel.disabled_reason")
    consecutive_failures = serializers.IntegerField(source="channel.consecutive_failures")
    last_notification = NotificationOutput(
        source="last", allow_null=True, help_text="Its last delivery result."
    )
    created_at = serializers.DateTimeField(source="channel.created_at")
    updated_at = serializers.DateTimeField(source="channel.updated_at")

    class Meta:
        ref_name = "Channel"


class ChannelSecretOutput(ChannelOutput):
    secret = serializers.CharField(
        source="channel.secret",
        required=False,
        help_text="The webhook signing secret: only for owners and editors, only here and "
        "in the answer to a create.",
    )

    class Meta:
        ref_name = "ChannelWithSecret"


_WARNINGS_HELP = (
    "What the save has to say without refusing it: a webhook host that does not resolve "
    "now (each send resolves it again). Empty when all is well."
)


class ChannelCreatedOutput(ChannelSecretOutput):
    warnings = serializers.ListField(
        source="channel.url_warning_list", child=serializers.CharField(), help_text=_WARNINGS_HELP
    )

    class Meta:
        ref_name = "ChannelCreated"


class ChannelSavedOutput(ChannelOutput):
    warnings = serializers.ListField(
        source="channel.url_warning_list", child=serializers.CharField(), help_text=_WARNINGS_HELP
    )

    class Meta:
        ref_name = "ChannelSaved"


# --- Rules -----------------------------------------------------------------------------------


class AlertStateOutput(serializers.Serializer):
    scope = serializers.CharField(help_text="`e2e`, `stage:<slug>` or `objective`.")
    status = serializers.ChoiceField(choices=AlertStatus.choices)
    condition_since = serializers.DateTimeField(allow_null=True)
    changed_at = serializers.DateTimeField()
    evaluated_at = serializers.DateTimeField()
    incident = serializers.IntegerField(allow_null=True, help_text="The open incident's id.")

    class Meta:
        ref_name = "AlertState"


class AlertRuleOutput(serializers.Serializer):
    slug = serializers.CharField(source="rule.slug")
    name = serializers.CharField(source="rule.name")
    pipeline = serializers.CharField(source="rule.pipeline.slug")
    scope = serializers.CharField(
        source="rule.scope_label", help_text="`e2e`, `any_stage` or `stage:<slug>`."
    )
    condition = ConditionField(source="rule")
    severity = serializers.ChoiceField(source="rule.severity", choices=Severity.choices)
    channels = serializers.ListField(child=serializers.CharField(), help_text="Channel slugs.")
    renotify_minutes = serializers.IntegerField(source="rule.renotify_minutes")
    notify_on_resolve = serializers.BooleanField(source="rule.notify_on_resolve")
    no_data = serializers.ChoiceField(source="rule.no_data", choices=NoDataPolicy.choices)
    no_data_after_s = serializers.IntegerField(source="rule.no_data_after_s", allow_null=True)
    enabled = serializers.BooleanField(source="rule.enabled")
    silenced_until = serializers.DateTimeField(source="rule.silenced_until", allow_null=True)
    silence_reason = serializers.CharField(source="rule.silence_reason")
    states = AlertStateOutput(many=True, help_text="One per scope the rule has looked at.")
    created_at = serializers.DateTimeField(source="rule.created_at")
    updated_at = serializers.DateTimeField(source="rule.updated_at")

    class Meta:
        ref_name = "AlertRule"


# --- Incidents -------------------------------------------------------------------------------


class StageShareOutput(serializers.Serializer):
    slug = serializers.CharField()
    name = serializers.CharField()
    share = serializers.FloatField(allow_null=True, help_text="Of the critical path, 0 to 1.")
    percentile = serializers.CharField(allow_null=True)
    observed_ms = serializers.FloatField(allow_null=True)
    budget_ms = serializers.IntegerField(allow_null=True)
    over_by_ms = serializers.FloatField(allow_null=True)

    class Meta:
        ref_name = "IncidentStageShare"


class BurnRateOutput(serializers.Serializer):
    long_window_s = serializers.IntegerField()
    short_window_s = serializers.IntegerField()
    factor = serializers.FloatField()
    long_burn_rate = serializers.FloatField(allow_null=True)
    short_burn_rate = serializers.FloatField(allow_null=True)
    severity = serializers.ChoiceField(choices=Severity.choices)

    class Meta:
        ref_name = "IncidentBurnRate"


class DegradationOutput(serializers.Serializer):
    rate_percent = serializers.FloatField(
        help_text="Share of the window's requests with a run-time decision in scope: the "
        "latest while firing, the one it resolved on once recovered."
    )
    peak_rate_percent = serializers.FloatField(help_text="The highest while firing.")
    threshold_percent = serializers.FloatField(help_text="The rule's percentage.")
    degraded = serializers.IntegerField(help_text="Requests with a decision in scope.")
    requests = serializers.IntegerField(help_text="The pipeline's requests in the window.")
    by_action = serializers.DictField(
        child=serializers.IntegerField(), help_text="Decisions by action, largest first."
    )
    by_stage = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="End to end: degraded requests by stage slug; empty for a stage.",
    )

    class Meta:
        ref_name = "IncidentDegradation"


class IncidentFactsOutput(serializers.Serializer):
    """What the notifications said; keys a kind of rule does not have are null or empty."""

    percentile = serializers.CharField(allow_null=True)
    observed_ms = serializers.FloatField(
        allow_null=True,
        help_text="At the latest evaluation while firing; once resolved, the figure it "
        "resolved on.",
    )
    peak_ms = serializers.FloatField(allow_null=True, help_text="The highest while firing.")
    budget_ms = serializers.IntegerField(allow_null=True)
    window_s = serializers.IntegerField(allow_null=True)
    sample_count = serializers.IntegerField(allow_null=True)
    violation_id = serializers.IntegerField(allow_null=True)
    objective_target = serializers.FloatField(allow_null=True)
    objective_threshold_ms = serializers.IntegerField(allow_null=True)
    example_trace_ids = serializers.ListField(
        child=serializers.CharField(), default=list, help_text="Slowest first."
    )
    top_stages = StageShareOutput(many=True, default=list)
    burn_rates = BurnRateOutput(many=True, default=list)
    degradation = DegradationOutput(
        allow_null=True, default=None, help_text="Degradation rules only; null otherwise."
    )

    class Meta:
        ref_name = "IncidentFacts"


def incident_scope(incident: Incident) -> str:
    if incident.stage is not None:
        return f"stage:{incident.stage.slug}"
    return incident.scope_key


class IncidentOutput(serializers.Serializer):
    id = serializers.IntegerField()
    rule = serializers.CharField(source="rule_slug", help_text="Kept when the rule is deleted.")
    rule_name = serializers.CharField()
    pipeline = serializers.CharField(source="pipeline.slug")
    stage = serializers.CharField(source="stage.slug", allow_null=True)
    scope = serializers.SerializerMethodField()
    severity = serializers.ChoiceField(choices=Severity.choices)
    status = serializers.SerializerMethodField()
    started_at = serializers.DateTimeField()
    resolved_at = serializers.DateTimeField(allow_null=True)
    resolution = serializers.ChoiceField(choices=[*Resolution.choices, ("", "")])
    duration_s = serializers.SerializerMethodField()
    summary = serializers.SerializerMethodField()
    facts = IncidentFactsOutput()

    class Meta:
        ref_name = "Incident"

    @extend_schema_field(
        {
            "type": "string",
            "description": "One line, as the notifications say it: what fired, or once "
            "resolved the figure back under budget (“p95 123 ms, back under its 150 ms "
            "budget”).",
        }
    )
    def get_summary(self, incident: Incident) -> str:
        return incident_summary(incident=incident)

    @extend_schema_field({"type": "string", "description": "`e2e`, `stage:<slug>` or `objective`."})
    def get_scope(self, incident: Incident) -> str:
        return incident_scope(incident)

    # Not an enum: several components have a "status" of their own values.
    @extend_schema_field({"type": "string", "description": "`firing` or `resolved`."})
    def get_status(self, incident: Incident) -> str:
        return "firing" if incident.is_open else "resolved"

    @extend_schema_field(
        {
            "type": "number",
            "format": "double",
            "nullable": True,
            "description": "Seconds from start to resolution; null while firing.",
        }
    )
    def get_duration_s(self, incident: Incident) -> float | None:
        if incident.resolved_at is None:
            return None
        return (incident.resolved_at - incident.started_at).total_seconds()


class NotificationCountsOutput(serializers.Serializer):
    total = serializers.IntegerField(source="notification_count")
    delivered = serializers.IntegerField(source="delivered_count")
    pending = serializers.IntegerField(source="pending_count")
    failed = serializers.IntegerField(source="failed_count")
    cancelled = serializers.IntegerField(source="cancelled_count")

    class Meta:
        ref_name = "IncidentNotificationCounts"


class IncidentSummaryOutput(IncidentOutput):
    notifications = NotificationCountsOutput(source="*")

    class Meta:
        ref_name = "IncidentSummary"


class IncidentDetailOutput(IncidentOutput):
    """For the schema: the view adds the notifications from their selector."""

    notifications = NotificationOutput(many=True, help_text="Oldest first.")

    class Meta:
        ref_name = "IncidentDetail"
