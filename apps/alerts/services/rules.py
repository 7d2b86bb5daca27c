"""Services: alert rules are created, changed, silenced and deleted here."""

from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from apps.alerts.models import (
    AlertRule,
    Channel,
    ConditionKind,
    NoDataPolicy,
    RuleScope,
    Severity,
)
from apps.alerts.rule_clean import alert_rule_clean
from apps.alerts.services.incidents import incidents_close_for_rule
from apps.pipelines.models import Pipeline, Stage
from apps.teams.models import Team

MAX_SILENCE_DAYS = 90


# The rule's own values, checked by ``alert_rule_clean``; the rest needs the database.
CLEANED_FIELDS = (
    "scope", "condition", "violation_for_minutes", "violation_factor", "violation_percentile",
    "burn_windows", "degradation_percent", "severity", "renotify_minutes", "no_data",
    "no_data_after_s",
)  # fmt: skip


def _clean(rule: AlertRule, channels: Sequence[Channel]) -> None:
    if rule.pipeline.team_id != rule.team_id:
        raise ValidationError({"pipeline": "No such pipeline in this team."})
    for name, value in alert_rule_clean({f: getattr(rule, f) for f in CLEANED_FIELDS}).items():
        setattr(rule, name, value)
    if rule.scope == RuleScope.STAGE:
        if rule.stage is None or rule.stage.pipeline_id != rule.pipeline.pk:
            raise ValidationError({"stage": "Name a stage of this pipeline."})
    else:
        rule.stage = None
    if rule.condition == ConditionKind.BURN_RATE:
        if rule.pipeline.objective_target is None:
            raise ValidationError(
                {"condition": f"Pipeline “{rule.pipeline.slug}” has no objective to burn."}
            )
        rule.violation_factor = None
        rule.violation_for_minutes = 0
        rule.violation_percentile = ""
    else:
        rule.burn_windows = []
    if rule.condition == ConditionKind.VIOLATION:
        _percentile_budgeted(rule)
    if any(channel.team_id != rule.team_id for channel in channels):
        raise ValidationError({"channels": "No such channel in this team."})
    # The pipeline and stage are checked above; the team stays in, for its unique slugs.
    rule.full_clean(exclude=["pipeline", "stage"])


def _percentile_budgeted(rule: AlertRule) -> None:
    """A rule narrowed to one percentile must watch a budget set at it, or it never fires;
    each stage of ``any_stage`` has its own, so that scope takes any."""
    percentile = rule.violation_percentile
    if not percentile or rule.scope == RuleScope.ANY_STAGE:
        return
    if rule.scope == RuleScope.STAGE and rule.stage is not None:
        budgeted = [rule.stage.budget_percentile] if rule.stage.budget_ms else []
        budgeted += [p for _, p, _ in rule.stage.stream_budgets if p not in budgeted]
        where = f"Stage “{rule.stage.slug}”"
    else:
        budgeted = list(rule.pipeline.budget)
        where = f"Pipeline “{rule.pipeline.slug}”"
    if percentile not in budgeted:
        has = f"its budget is at {', '.join(budgeted)}" if budgeted else "it has no budget"
        raise ValidationError(
            {
                "violation_percentile": f"{where} has no {percentile} budget ({has}): the rule "
                "would never fire."
            }
        )


def alert_rule_create(
    *,
    team: Team,
    pipeline: Pipeline,
    slug: str,
    channels: Sequence[Channel],
    name: str = "",
    scope: str = RuleScope.E2E,
    stage: Stage | None = None,
    condition: str = ConditionKind.VIOLATION,
    violation_for_minutes: int = 0,
    violation_factor: Decimal | None = None,
    violation_percentile: str = "",
    burn_windows: Any = None,
    degradation_percent: Decimal | None = None,
    severity: str = Severity.WARNING,
    renotify_minutes: int = 240,
    notify_on_resolve: bool = True,
    no_data: str = NoDataPolicy.RESOLVE,
    no_data_after_s: int | None = None,
    enabled: bool = True,
) -> AlertRule:
    rule = AlertRule(
        team=team,
        pipeline=pipeline,
        slug=slug,
        name=name,
        scope=scope,
        stage=stage,
        condition=condition,
        violation_for_minutes=violation_for_minutes,
        violation_factor=violation_factor,
        violation_percentile=violation_percentile,
        burn_windows=burn_windows or [],
        degradation_percent=degradation_percent,
        severity=severity,
        renotify_minutes=renotify_minutes,
        notify_on_resolve=notify_on_resolve,
        no_data=no_data,
        no_data_after_s=no_data_after_s,
        enabled=enabled,
    )
    _clean(rule, channels)
    with transaction.atomic():
        rule.save()
        rule.channels.set(channels)
    return rule


# What a change may touch; the team and slug stay.
RULE_FIELDS = (
    "name", "pipeline", "scope", "stage", "condition", "violation_for_minutes",
    "violation_factor", "violation_percentile", "burn_windows", "degradation_percent",
    "severity", "renotify_minutes", "notify_on_resolve", "no_data", "no_data_after_s",
    "enabled",
)  # fmt: skip
# A change of any of these makes the rule watch something else: what it fired for is over.
_WATCHED = ("pipeline_id", "scope", "stage_id", "condition")


def _watched(rule: AlertRule) -> tuple[object, ...]:
    return tuple(getattr(rule, name) for name in _WATCHED)


def alert_rule_update(
    *, rule: AlertRule, channels: Sequence[Channel] | None = None, **fields: Any
) -> AlertRule:
    """Change the given fields (``RULE_FIELDS``). A rule made to watch something else, or
    disabled, closes its open incidents without telling anyone."""
    unknown = set(fields) - set(RULE_FIELDS)
    if unknown:
        raise TypeError(f"Unknown alert rule fields: {', '.join(sorted(unknown))}")
    before = _watched(rule)
    for name, value in fields.items():
        setattr(rule, name, value)
    if "burn_windows" in fields and fields["burn_windows"] is None:
        rule.burn_windows = []
    kept = list(rule.channels.all()) if channels is None else list(channels)
    _clean(rule, kept)
    after = _watched(rule)
    with transaction.atomic():
        rule.save()
        if channels is not None:
            rule.channels.set(channels)
        if before != after or not rule.enabled:
            incidents_close_for_rule(rule=rule, now=timezone.now())
    return rule


def alert_rule_silence(
    *, rule: AlertRule, until: datetime, reason: str, now: datetime | None = None
) -> AlertRule:
    """No notification until ``until``; the rule keeps evaluating and its history shows it."""
    now = now or timezone.now()
    if until <= now:
        raise ValidationError({"silenced_until": "Silence until a time in the future."})
    if (until - now).days >= MAX_SILENCE_DAYS:
        raise ValidationError({"silenced_until": f"Silence for less than {MAX_SILENCE_DAYS} days."})
    if not reason.strip():
        raise ValidationError({"silence_reason": "Say why, for whoever wonders later."})
    rule.silenced_until = until
    rule.silence_reason = reason.strip()[:500]
    rule.save(update_fields=["silenced_until", "silence_reason", "updated_at"])
    return rule


def alert_rule_unsilence(*, rule: AlertRule) -> AlertRule:
    rule.silenced_until = None
    rule.silence_reason = ""
    rule.save(update_fields=["silenced_until", "silence_reason", "updated_at"])
    return rule


def alert_rule_delete(*, rule: AlertRule) -> None:
    with transaction.atomic():
        incidents_close_for_rule(rule=rule, now=timezone.now())
        rule.delete()
