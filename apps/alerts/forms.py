"""Forms of the alert pages: channels, rules and silences, in the shapes the services take."""

import re
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django import forms
from django.utils import timezone

from apps.alerts.models import (
    AlertRule,
    Channel,
    ChannelKind,
    ConditionKind,
    NoDataPolicy,
    RuleScope,
    Severity,
    WebhookFormat,
)
from apps.core.percentiles import PERCENTILES
from apps.pipelines.models import Pipeline, Stage
from apps.teams.models import slug_validator

# Room for Channel.MAX_ADDRESSES long addresses and their separators; anything longer is refused
# before it is split, so a pasted directory costs nothing.
MAX_ADDRESS_TEXT = 6000
_ADDRESS_SEPARATORS = re.compile(r"[\s,;]+")
SLUG_HELP = "Lowercase letters, digits and hyphens; used in the API and the configuration file."


def split_addresses(text: str) -> list[str]:
    """Addresses one per line or separated by commas; blanks dropped."""
    return [part for part in _ADDRESS_SEPARATORS.split(text) if part]


class SlugField(forms.CharField):
    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_length", 50)
        kwargs.setdefault("help_text", SLUG_HELP)
        super().__init__(validators=[slug_validator], **kwargs)


class ChannelForm(forms.Form):
    """What both kinds share; ``slug`` is fixed once the channel exists."""

    kind: str = ""
    slug = SlugField()
    name = forms.CharField(max_length=100, required=False, help_text="Optional; shown on pages.")

    def __init__(self, *args: Any, channel: Channel | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.channel = channel
        if channel is not None:
            del self.fields["slug"]

    @classmethod
    def initial_for(cls, channel: Channel) -> dict[str, Any]:
        return {"name": channel.name}

    def service_kwargs(self) -> dict[str, Any]:
        return dict(self.cleaned_data)


class EmailChannelForm(ChannelForm):
    kind = ChannelKind.EMAIL
    addresses = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": "oncall@example.com"}),
        max_length=MAX_ADDRESS_TEXT,
        help_text=f"One per line or separated by commas; at most {Channel.MAX_ADDRESSES}.",
    )

    def clean_addresses(self) -> list[str]:
        # The text split into addresses; channel_clean checks them, through the services.
        return split_addresses(self.cleaned_data["addresses"])

    @classmethod
    def initial_for(cls, channel: Channel) -> dict[str, Any]:
        return {"name": channel.name, "addresses": "\n".join(channel.email_to)}

    def service_kwargs(self) -> dict[str, Any]:
        data = dict(self.cleaned_data)
        data["email_to"] = data.pop("addresses")
        return data


class WebhookChannelForm(ChannelForm):
    kind = ChannelKind.WEBHOOK
    url = forms.CharField(
        label="URL",
        max_length=2000,
        widget=forms.TextInput(attrs={"placeholder": "https://alerts.example.com/hooks/budgets"}),
        help_text="An http:// or https:// address; redirects are not followed.",
    )
    format = forms.ChoiceField(
        choices=WebhookFormat.choices,
        initial=WebhookFormat.NATIVE,
        help_text="Native JSON for your own receiver, the Alertmanager webhook body, or a "
        "Slack incoming-webhook message.",
    )
    secret = forms.CharField(
        label="Your own signing secret",
        required=False,
        max_length=200,
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}),
        help_text="Optional: “whsec_” and base64, if your receiver already has one. "
        "Left empty, a new channel gets a fresh secret and an existing one keeps its own.",
    )

    @classmethod
    def initial_for(cls, channel: Channel) -> dict[str, Any]:
        return {"name": channel.name, "url": channel.url, "format": channel.format}

    def clean_url(self) -> str:
        return str(self.cleaned_data["url"]).strip()

    def clean_secret(self) -> str:
        return str(self.cleaned_data["secret"]).strip()


CHANNEL_FORMS: dict[str, type[ChannelForm]] = {
    ChannelKind.EMAIL: EmailChannelForm,
    ChannelKind.WEBHOOK: WebhookChannelForm,
}


def _stage_choices(pipelines: Sequence[Pipeline]) -> list[tuple[str, Any]]:
    """Stages grouped by pipeline, so that the list reads without script."""
    choices: list[tuple[str, Any]] = [("", "—")]
    for pipeline in pipelines:
        stages = [(str(stage.pk), stage.name) for stage in pipeline.stages.all()]
        if stages:
            choices.append((pipeline.name, stages))
    return choices


class RuleForm(forms.Form):
    slug = SlugField()
    name = forms.CharField(max_length=100, required=False, help_text="Optional; shown on pages.")
    pipeline = forms.ChoiceField(help_text="The pipeline whose budgets or objective it watches.")
    scope = forms.ChoiceField(
        choices=RuleScope.choices,
        initial=RuleScope.E2E,
        widget=forms.RadioSelect,
        help_text="Any stage keeps one incident per stage that is over its budget.",
    )
    stage = forms.ChoiceField(required=False, help_text="For “one stage”: a stage of the pipeline.")
    condition = forms.ChoiceField(
        choices=ConditionKind.choices, initial=ConditionKind.VIOLATION, widget=forms.RadioSelect
    )
    # Numbers are read here and checked by alert_rule_clean, through the services; the
    # bounds only guide the browser's number inputs.
    violation_for_minutes = forms.IntegerField(
        label="For (minutes)",
        initial=0,
        widget=forms.NumberInput(attrs={"min": 0, "max": AlertRule.MAX_VIOLATION_MINUTES}),
        help_text="How long the condition holds before the rule fires; 0 fires at once.",
    )
    violation_factor = forms.DecimalField(
        label="Only at (times the budget)",
        required=False,
        widget=forms.NumberInput(
            attrs={
                "step": "0.01",
                "placeholder": "1.5",
                "min": AlertRule.MIN_FACTOR,
                "max": AlertRule.MAX_FACTOR,
            }
        ),
        help_text="Optional: fire only while the percentile is at least this many times its "
        "budget.",
    )
    # Offered as a list, read as text: alert_rule_clean says what is wrong with a value.
    violation_percentile = forms.CharField(
        label="Only the percentile",
        required=False,
        widget=forms.Select(choices=[("", "any percentile"), *((p, p) for p in PERCENTILES)]),
        help_text="Optional: fire only on the violations of this percentile's budget, such as "
        "p99 for a page while p95 only warns.",
    )
    degradation_percent = forms.DecimalField(
        label="Degraded requests over (%)",
        required=False,
        widget=forms.NumberInput(
            attrs={
                "step": "0.1",
                "placeholder": "20",
                "min": AlertRule.MIN_DEGRADATION_PERCENT,
                "max": AlertRule.MAX_DEGRADATION_PERCENT,
            }
        ),
        help_text="For a degradation rate: fire when at least this share of the requests in "
        "the evaluation window had a run-time decision (skip, fallback, hedge, cap, timeout) "
        "in scope.",
    )
    severity = forms.ChoiceField(choices=Severity.choices, initial=Severity.WARNING)
    channels = forms.MultipleChoiceField(
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Where it is told. Disabled channels are skipped until enabled again.",
    )
    renotify_minutes = forms.IntegerField(
        label="Remind every (minutes)",
        initial=240,
        widget=forms.NumberInput(attrs={"min": 0, "max": AlertRule.MAX_RENOTIFY_MINUTES}),
        help_text="While it keeps firing; 0 never reminds.",
    )
    notify_on_resolve = forms.BooleanField(
        label="Tell the channels when it resolves", required=False, initial=True
    )
    no_data = forms.ChoiceField(
        label="When data stops",
        choices=NoDataPolicy.choices,
        initial=NoDataPolicy.RESOLVE,
        help_text="Resolve the alert, keep its state, or send one “no data” message.",
    )
    no_data_after_s = forms.IntegerField(
        label="No data after (seconds)",
        required=False,
        widget=forms.NumberInput(
            attrs={"min": AlertRule.MIN_NO_DATA_AFTER_S, "max": AlertRule.MAX_NO_DATA_AFTER_S}
        ),
        help_text="Empty: three of the pipeline's evaluation windows.",
    )
    enabled = forms.BooleanField(required=False, initial=True)

    def __init__(
        self,
        *args: Any,
        pipelines: Sequence[Pipeline],
        channels: Sequence[Channel],
        rule: AlertRule | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.rule = rule
        self._pipelines = {p.slug: p for p in pipelines}
        self._stages = {str(s.pk): s for p in pipelines for s in p.stages.all()}
        self._channels = {c.slug: c for c in channels}
        pipeline_field = self.fields["pipeline"]
        assert isinstance(pipeline_field, forms.ChoiceField)
        pipeline_field.choices = [(p.slug, p.name) for p in pipelines]
        stage_field = self.fields["stage"]
        assert isinstance(stage_field, forms.ChoiceField)
        stage_field.choices = _stage_choices(pipelines)
        channel_field = self.fields["channels"]
        assert isinstance(channel_field, forms.MultipleChoiceField)
        channel_field.choices = [
            (c.slug, f"{c} ({c.kind}{'' if c.is_enabled else ', disabled'})") for c in channels
        ]
        if rule is not None:
            del self.fields["slug"]

    @property
    def keeps_custom_windows(self) -> bool:
        """A burn-rate rule with its own window pairs (set in the API or the configuration
        file) keeps them: the form offers only the defaults."""
        return bool(
            self.rule is not None
            and self.rule.condition == ConditionKind.BURN_RATE
            and self.rule.burn_windows
        )

    @classmethod
    def initial_for(cls, rule: AlertRule) -> dict[str, Any]:
        return {
            "name": rule.name,
            "pipeline": rule.pipeline.slug,
            "scope": rule.scope,
            "stage": str(rule.stage_id) if rule.stage_id else "",
            "condition": rule.condition,
            "violation_for_minutes": rule.violation_for_minutes,
            "violation_factor": rule.violation_factor,
            "violation_percentile": rule.violation_percentile,
            "degradation_percent": rule.degradation_percent,
            "severity": rule.severity,
            "channels": [channel.slug for channel in rule.channels.all()],
            "renotify_minutes": rule.renotify_minutes,
            "notify_on_resolve": rule.notify_on_resolve,
            "no_data": rule.no_data,
            "no_data_after_s": rule.no_data_after_s,
            "enabled": rule.enabled,
        }

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("scope") == RuleScope.STAGE and not data.get("stage"):
            self.add_error("stage", "Choose the stage to watch.")
        return data

    def service_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for alert_rule_create and alert_rule_update, objects resolved."""
        data = dict(self.cleaned_data)
        data["pipeline"] = self._pipelines[data["pipeline"]]
        stage: Stage | None = self._stages.get(data.pop("stage") or "")
        data["stage"] = stage if data["scope"] == RuleScope.STAGE else None
        data["channels"] = [self._channels[slug] for slug in data["channels"]]
        if data["condition"] == ConditionKind.BURN_RATE and not self.keeps_custom_windows:
            data["burn_windows"] = []
        return data


SILENCE_CHOICES = [("1h", "1 hour"), ("4h", "4 hours"), ("1d", "1 day"), ("custom", "until…")]
_SILENCE_SPANS = {"1h": timedelta(hours=1), "4h": timedelta(hours=4), "1d": timedelta(days=1)}


class SilenceForm(forms.Form):
    duration = forms.ChoiceField(
        label="Silence for", choices=SILENCE_CHOICES, initial="1h", widget=forms.RadioSelect
    )
    until = forms.DateTimeField(
        label="Until (UTC)",
        required=False,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
        help_text="For “until…”: a time in UTC, less than 90 days ahead.",
    )
    reason = forms.CharField(
        max_length=500,
        widget=forms.TextInput(attrs={"placeholder": "Reindexing the vector store until 14:00"}),
        help_text="Shown beside the rule, for whoever wonders later.",
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        duration = data.get("duration")
        if duration in _SILENCE_SPANS:
            data["until"] = timezone.now() + _SILENCE_SPANS[duration]
        elif duration == "custom" and not data.get("until"):
            self.add_error("until", "Give the time the silence ends.")
        return data

    def service_kwargs(self) -> dict[str, Any]:
        until: datetime = self.cleaned_data["until"]
        return {"until": until, "reason": self.cleaned_data["reason"]}
