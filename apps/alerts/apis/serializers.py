"""Serializers of the alerts API: strict inputs, the condition and scope fields, outputs."""

import re
from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.alerts.models import (
    AlertRule,
    AlertStatus,
    AttemptOutcome,
    Channel,
    ChannelKind,
    ConditionKind,
    Incident,
    NoDataPolicy,
    NotificationEvent,
    NotificationStatus,
    RecipientState,
    Resolution,
    RuleScope,
    Severity,
    WebhookFormat,
)
from apps.alerts.rule_clean import alert_rule_clean, subject_message
from apps.alerts.services.payloads import incident_summary

MAX_RULE_CHANNELS = 50
VIOLATION_AT_ONCE = {
    "condition": ConditionKind.VIOLATION,
    "violation_for_minutes": 0,
    "violation_factor": None,
    "burn_windows": [],
}
SCOPE_RE = re.compile(r"^(e2e|any_stage|stage:[-a-z0-9]{1,50})$")


class StrictInput(serializers.Serializer):
    """Refuses keys it does not know: a misspelt field would otherwise be dropped unseen.
    ``fixed`` names fields that exist but cannot change, with the reason."""

    fixed: Mapping[str, str] = {}

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            errors = {
                str(key): [self.fixed.get(str(key), "Unknown field.")]
                for key in data
                if key not in self.fields
            }
            if errors:
                raise serializers.ValidationError(errors)
        return super().to_internal_value(data)


# --- The condition and the scope of a rule ---------------------------------------------------

BURN_WINDOW_SCHEMA = {
    "type": "object",
    "properties": {
        "long_s": {"type": "integer", "minimum": 61},
        "short_s": {"type": "integer", "minimum": 60},
        "factor": {"type": "number", "minimum": 0, "exclusiveMinimum": True, "maximum": 1000},
        "severity": {"type": "string", "enum": list(Severity.values)},
    },
    "required": ["long_s", "short_s", "factor", "severity"],
    "additionalProperties": False,
}
CONDITION_SCHEMA = {
    "oneOf": [
        {
            "type": "object",
            "title": "violation",
            "properties": {
                "violation_for_minutes": {
                    "type": "integer",
                    "minimum": 0,
                    "maximum": AlertRule.MAX_VIOLATION_MINUTES,
                    "description": "How long a violation in scope must stay open; 0 fires at once.",
                },
                "factor": {
                    "type": "number",
                    "minimum": AlertRule.MIN_FACTOR,
                    "maximum": AlertRule.MAX_FACTOR,
                    "nullable": True,
                    "description": "Only while the percentile is at least this many times "
                    "its budget (two decimals at most).",
                },
            },
            "additionalProperties": False,
        },
        {
            "type": "object",
            "title": "burn_rate",
            "properties": {
                "burn_rate": {
                    "oneOf": [
                        {"type": "string", "enum": ["default"]},
                        {"type": "array", "items": BURN_WINDOW_SCHEMA, "maxItems": 6},
                    ],
                    "description": "“default”: the SRE workbook's three pairs; or your own.",
                }
            },
            "required": ["burn_rate"],
            "additionalProperties": False,
        },
    ],
    "example": {"violation_for_minutes": 2, "factor": 1.5},
}


def _invalid(message: str) -> serializers.ValidationError:
    return serializers.ValidationError(message)


# The condition's keys, by the rule field each one sets.
CONDITION_KEYS = {"violation_for_minutes": "violation_for_minutes", "violation_factor": "factor"}


def condition_clean(fields: dict[str, Any]) -> dict[str, Any]:
    """The condition's fields checked by ``alert_rule_clean``, its errors said of the keys
    the API names (a burn window's message names its window)."""
    try:
        return alert_rule_clean(fields)
    except DjangoValidationError as exc:
        messages = [
            message if name == "burn_windows" else subject_message(CONDITION_KEYS[name], message)
            for name, errors in exc.message_dict.items()
            for message in errors
        ]
        raise serializers.ValidationError(messages) from None


@extend_schema_field(CONDITION_SCHEMA)
class ConditionField(serializers.Field):
    """``{"violation_for_minutes": 2, "factor": 1.5}``, ``{"burn_rate": "default"}`` or
    ``{"burn_rate": [{"long_s": 3600, "short_s": 300, "factor": 14.4, "severity": …}]}``;
    read as the rule fields the services take, the whole condition at once."""

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        if not isinstance(data, Mapping) or not data:
            raise _invalid(
                'A condition is an object: {"violation_for_minutes": 2} or '
                '{"burn_rate": "default"}.'
            )
        unknown = sorted(set(data) - {"violation_for_minutes", "factor", "burn_rate"})
        if unknown:
            raise _invalid(f"Unknown key {', '.join(map(str, unknown))}.")
        if "burn_rate" in data:
            if len(data) > 1:
                raise _invalid(
                    "A condition is a violation (violation_for_minutes, factor) or a "
                    "burn_rate, not both."
                )
            windows = data["burn_rate"]
            if windows == "default":
                windows = []
            elif not isinstance(windows, list):
                raise _invalid("burn_rate is “default” or a list of window pairs.")
            return {
                "condition": ConditionKind.BURN_RATE,
                **condition_clean({"burn_windows": windows}),
            }
        fields = {
            "violation_for_minutes": data.get("violation_for_minutes", 0),
            "violation_factor": data.get("factor"),
        }
        return {"condition": ConditionKind.VIOLATION, **condition_clean(fields), "burn_windows": []}

    def to_representation(self, rule: AlertRule) -> dict[str, Any]:
        if rule.condition == ConditionKind.BURN_RATE:
            return {"burn_rate": list(rule.burn_windows) or "default"}
        condition: dict[str, Any] = {"violation_for_minutes": rule.violation_for_minutes}
        if rule.violation_factor is not None:
            condition["factor"] = float(rule.violation_factor)
        return condition


class ScopeField(serializers.CharField):
    """``e2e``, ``any_stage`` or ``stage:<stage slug>``."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_length", 60)
        kwargs.setdefault(
            "help_text", "`e2e` (the end-to-end budget), `any_stage`, or `stage:<slug>`."
        )
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data)
        if not SCOPE_RE.match(value):
            raise _invalid("Use e2e, any_stage or stage:<stage slug>.")
        return value


# --- Channels --------------------------------------------------------------------------------


class ChannelInput(StrictInput):
    slug = serializers.CharField(max_length=50)
    name = serializers.CharField(max_length=100, allow_blank=True, default="")
    kind = serializers.ChoiceField(choices=ChannelKind.choices)
    email_to = serializers.ListField(
        child=serializers.CharField(max_length=254),
        default=list,
        help_text=f"E-mail addresses, for kind email; at most {Channel.MAX_ADDRESSES}.",
    )
    url = serializers.CharField(
        max_length=2000, allow_blank=True, default="", help_text="For kind webhook: http(s)."
    )
    format = serializers.ChoiceField(choices=WebhookFormat.choices, default=WebhookFormat.NATIVE)
    secret = serializers.CharField(
        max_length=200,
        allow_blank=True,
        default="",
        write_only=True,
        help_text="Optional signing secret (“whsec_” and base64); left out, one is made.",
    )

    class Meta:
        ref_name = "ChannelInput"


class ChannelUpdateInput(StrictInput):
    fixed = {
        "slug": "The slug of a channel cannot change; create another.",
        "kind": "The kind of a channel cannot change; create another.",
    }

    name = serializers.CharField(max_length=100, allow_blank=True, required=False)
    email_to = serializers.ListField(child=serializers.CharField(max_length=254), required=False)
    url = serializers.CharField(max_length=2000, required=False)
    format = serializers.ChoiceField(choices=WebhookFormat.choices, required=False)
    secret = serializers.CharField(
        max_length=200,
        required=False,
        write_only=True,
        help_text="A new signing secret of your own.",
    )
    enabled = serializers.BooleanField(
        required=False, help_text="true puts a disabled channel back in service."
    )

    class Meta:
        ref_name = "ChannelUpdateInput"


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


class RecipientResendInput(StrictInput):
    address = serializers.CharField(max_length=254, help_text="One of the channel's addresses.")

    class Meta:
        ref_name = "ChannelRecipientResendInput"


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


class AlertRuleInput(StrictInput):
    slug = serializers.CharField(max_length=50)
    name = serializers.CharField(max_length=100, allow_blank=True, default="")
    pipeline = serializers.CharField(max_length=50, help_text="The slug of a pipeline.")
    scope = ScopeField(default=RuleScope.E2E)
    condition = ConditionField(
        required=False, help_text="Left out on create: a violation fires the rule at once."
    )
    severity = serializers.ChoiceField(choices=Severity.choices, default=Severity.WARNING)
    channels = serializers.ListField(
        child=serializers.CharField(max_length=50),
        max_length=MAX_RULE_CHANNELS,
        default=list,
        help_text="Channel slugs.",
    )
    # Whole numbers read here; their bounds are alert_rule_clean's, through the services.
    renotify_minutes = serializers.IntegerField(
        default=240, help_text="A reminder while firing; 0 never (at most a week: 10080)."
    )
    notify_on_resolve = serializers.BooleanField(default=True)
    no_data = serializers.ChoiceField(choices=NoDataPolicy.choices, default=NoDataPolicy.RESOLVE)
    no_data_after_s = serializers.IntegerField(
        allow_null=True,
        default=None,
        help_text="Without a verdict this long a scope has no data, 30 to 86400; null: three "
        "windows.",
    )
    enabled = serializers.BooleanField(default=True)

    class Meta:
        ref_name = "AlertRuleInput"


class AlertRuleUpdateInput(AlertRuleInput):
    fixed = {"slug": "The slug of a rule cannot change; create another."}

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        del fields["slug"]
        return fields

    class Meta:
        ref_name = "AlertRuleUpdateInput"


class SilenceInput(StrictInput):
    until = serializers.DateTimeField(help_text="When notifications start again, under 90 days.")
    reason = serializers.CharField(max_length=500, help_text="Why, for whoever wonders later.")

    class Meta:
        ref_name = "SilenceInput"


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
