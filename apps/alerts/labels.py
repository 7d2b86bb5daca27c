"""Rules, scopes, states and channels as the alert pages (and the API) show them."""

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from apps.alerts.models import (
    AlertRule,
    AlertState,
    AttemptOutcome,
    Channel,
    ChannelKind,
    ConditionKind,
    DeliveryAttempt,
    Incident,
    Notification,
    NotificationStatus,
    RuleScope,
)
from apps.alerts.selectors.history import channel_last_notification
from apps.alerts.selectors.recipients import RecipientStatus, channels_recipient_statuses
from apps.alerts.webhook_urls import url_for_viewers
from apps.core.percentiles import PERCENTILES
from apps.teams.models import Team

TIMES = "\u00d7"


def factor_text(factor: Decimal) -> str:
    return f"{factor.normalize():f}"


def _percentiles(rule: AlertRule) -> str:
    if rule.scope == RuleScope.STAGE and rule.stage is not None:
        return rule.stage.budget_percentile if rule.stage.budget_ms else ""
    if rule.scope == RuleScope.E2E:
        return "/".join(p for p in PERCENTILES if p in rule.pipeline.budget)
    return ""


def _lasting(words: str, minutes: int) -> str:
    return f"{words} for {minutes} min" if minutes else f"{words}, at once"


def condition_words(rule: AlertRule) -> str:
    """The condition in a few words: "p95 over budget for 2 min", "p95 at 1.5 times the
    budget" (with the multiplication sign), "burn rate, SRE defaults", "degradation rate
    at least 20 % for 5 min"."""
    if rule.condition == ConditionKind.BURN_RATE:
        pairs = len(rule.burn_windows)
        if not pairs:
            return "burn rate, SRE defaults"
        return f"burn rate, {pairs} window pair{'s' if pairs != 1 else ''} of its own"
    if rule.condition == ConditionKind.DEGRADATION:
        subject = "degradation rate"
        if rule.scope == RuleScope.ANY_STAGE:
            subject = f"a stage's {subject}"
        percent = rule.degradation_percent
        shown = factor_text(percent) if percent is not None else "?"
        return _lasting(f"{subject} at least {shown} %", rule.violation_for_minutes)
    subject = "a stage" if rule.scope == RuleScope.ANY_STAGE else _percentiles(rule)
    if rule.violation_percentile:
        percentile = rule.violation_percentile
        subject = f"a stage's {percentile}" if rule.scope == RuleScope.ANY_STAGE else percentile
    if rule.violation_factor is not None:
        words = f"at {factor_text(rule.violation_factor)}{TIMES} budget"
    elif rule.scope == RuleScope.ANY_STAGE:
        words = "over its budget"
    else:
        words = "over budget"
    if subject:
        words = f"{subject} {words}"
    return _lasting(words, rule.violation_for_minutes)


def scope_words(rule: AlertRule) -> str:
    if rule.scope == RuleScope.STAGE and rule.stage is not None:
        return f"stage {rule.stage.name}"
    return RuleScope(rule.scope).label


def incident_scope_words(incident: Incident) -> str:
    if incident.stage is not None:
        return incident.stage.name
    if incident.scope_key == "objective":
        return "objective"
    if incident.scope_key.startswith("stage:"):
        return "a stage since deleted"
    return "end to end"


@dataclass(frozen=True)
class StateRow:
    scope: str
    status: str
    since: datetime


def state_rows(rule: AlertRule, stage_names: dict[int, str]) -> list[StateRow]:
    """Each scope the rule has looked at; a rule that never saw a violation is ok."""
    rows = []
    for state in rule.states.all():
        rows.append(StateRow(_state_scope(state, stage_names), state.status, state.changed_at))
    return rows


def _state_scope(state: AlertState, stage_names: dict[int, str]) -> str:
    key = state.scope_key
    if key == "e2e":
        return "end to end"
    if key.startswith("stage:"):
        try:
            return stage_names.get(int(key.removeprefix("stage:")), "a stage since deleted")
        except ValueError:
            return key
    return key


@dataclass(frozen=True)
class ChannelRow:
    """A channel as its team sees it: viewers get a webhook's host, never its path;
    every member sees each address of an e-mail channel with its state."""

    channel: Channel
    last: Notification | None
    can_write: bool
    recipients: list[RecipientStatus] = field(default_factory=list)

    @property
    def url(self) -> str:
        if self.channel.kind == ChannelKind.WEBHOOK and not self.can_write:
            return url_for_viewers(self.channel.url)
        return self.channel.url

    @property
    def target(self) -> str:
        return self.url if self.channel.kind == ChannelKind.WEBHOOK else self.channel.target

    @property
    def last_attempt(self) -> DeliveryAttempt | None:
        attempts = list(self.last.delivery_attempts.all()) if self.last else []
        return attempts[-1] if attempts else None

    @property
    def waiting(self) -> bool:
        """The last notification is still to be sent: its fragment keeps asking."""
        return self.last is not None and self.last.status == NotificationStatus.PENDING

    @property
    def retrying(self) -> bool:
        attempt = self.last_attempt
        return self.waiting and attempt is not None and attempt.outcome == AttemptOutcome.RETRY


def channel_rows(*, team: Team, channels: list[Channel], can_write: bool) -> list[ChannelRow]:
    """The team's ``channels`` with their last results and addresses, as pages show them."""
    recipients = channels_recipient_statuses(team=team, channels=channels)
    return [
        ChannelRow(
            channel,
            channel_last_notification(channel=channel),
            can_write,
            recipients.get(channel.pk, []),
        )
        for channel in channels
    ]


def channel_row(channel: Channel, *, can_write: bool) -> ChannelRow:
    return channel_rows(team=channel.team, channels=[channel], can_write=can_write)[0]
