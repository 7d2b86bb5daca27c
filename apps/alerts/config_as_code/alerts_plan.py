"""Diff of the ``alerts:`` section against the database, as steps that call the services.

The steps find the rule's pipeline, stage and channels by slug when they run: the
sections before this one may just have created them.
"""

import json
from collections.abc import Callable
from typing import Any

from django.core.exceptions import ValidationError

from apps.alerts.burn_windows import BurnWindow
from apps.alerts.config_as_code.alerts_schema import AlertSpec, AlertsSpec
from apps.alerts.config_as_code.durations import duration_text
from apps.alerts.config_as_code.selectors import alert_rules_for_config, channels_for_config
from apps.alerts.models import AlertRule, ConditionKind, RuleScope
from apps.alerts.services.rules import alert_rule_create, alert_rule_delete, alert_rule_update
from apps.pipelines.config_as_code.steps import Plan, PlanOptions, Step
from apps.pipelines.models import Pipeline, Stage
from apps.teams.models import Team


def _windows(windows: list[BurnWindow]) -> str:
    if not windows:
        return "default windows"
    return "; ".join(
        f"{duration_text(w['long_s'])}/{duration_text(w['short_s'])} x{w['factor']} {w['severity']}"
        for w in windows
    )


def _condition(rule: AlertRule | AlertSpec) -> str:
    """The condition as the plan says it; a rule and its spec say it alike."""
    minutes, factor = rule.violation_for_minutes, rule.violation_factor
    if rule.condition == ConditionKind.BURN_RATE:
        return f"burn rate ({_windows(rule.burn_windows)})"
    if rule.condition == ConditionKind.DEGRADATION:
        percent = rule.degradation_percent
        shown = f"{percent.normalize():f}" if percent is not None else "?"
        return f"degradation over {shown} % for {minutes} min"
    percentile = rule.violation_percentile
    text = f"{percentile} violation" if percentile else "violation"
    text = f"{text} for {minutes} min"
    return f"{text} at {factor.normalize():f}x budget" if factor is not None else text


def _renotify(minutes: int) -> str:
    return duration_text(minutes * 60) if minutes else "never"


def _no_data_after(seconds: int | None) -> str:
    return duration_text(seconds) if seconds is not None else "(default)"


def _name(name: str) -> str:
    return json.dumps(name, ensure_ascii=False) if name else "(none)"


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ", ".join(value) if value else "(none)"
    return str(value) if value not in (None, "") else "(none)"


def _rule_view(rule: AlertRule) -> dict[str, str]:
    """A rule as the plan shows it; two rules with equal views are the same to the file."""
    scope = (
        f"stage:{rule.stage.slug}" if rule.scope == RuleScope.STAGE and rule.stage else rule.scope
    )
    return {
        "name": _name(rule.name),
        "pipeline": rule.pipeline.slug,
        "scope": scope,
        "condition": _condition(rule),
        "severity": rule.severity,
        "channels": _shown([channel.slug for channel in rule.channels.all()]),
        "renotify": _renotify(rule.renotify_minutes),
        "notify_on_resolve": _shown(rule.notify_on_resolve),
        "no_data": rule.no_data,
        "no_data_after": _no_data_after(rule.no_data_after_s),
        "enabled": _shown(rule.enabled),
    }


def _spec_view(spec: AlertSpec) -> dict[str, str]:
    scope = f"stage:{spec.stage}" if spec.scope == RuleScope.STAGE else spec.scope
    return {
        "name": _name(spec.name),
        "pipeline": spec.pipeline,
        "scope": scope,
        "condition": _condition(spec),
        "severity": spec.severity,
        "channels": _shown(spec.channel_slugs),
        "renotify": _renotify(spec.renotify_minutes),
        "notify_on_resolve": _shown(spec.notify_on_resolve),
        "no_data": spec.no_data,
        "no_data_after": _no_data_after(spec.no_data_after_s),
        "enabled": _shown(spec.enabled),
    }


def _fields(team: Team, spec: AlertSpec) -> dict[str, Any]:
    """The service's arguments, with the pipeline, stage and channels found by slug."""
    pipeline = Pipeline.objects.filter(team=team, slug=spec.pipeline).first()
    if pipeline is None:
        raise ValidationError({"pipeline": f"No pipeline “{spec.pipeline}” in this team."})
    stage = None
    if spec.scope == RuleScope.STAGE:
        stage = Stage.objects.filter(pipeline=pipeline, slug=spec.stage).first()
        if stage is None:
            raise ValidationError({"stage": f"No stage “{spec.stage}” in “{spec.pipeline}”."})
    channels = list(channels_for_config(team=team).filter(slug__in=spec.channel_slugs))
    missing = set(spec.channel_slugs) - {channel.slug for channel in channels}
    if missing:
        raise ValidationError({"channels": f"No channel {', '.join(sorted(missing))}."})
    return {
        "pipeline": pipeline,
        "stage": stage,
        "channels": channels,
        "name": spec.name,
        "scope": spec.scope,
        "condition": spec.condition,
        "violation_for_minutes": spec.violation_for_minutes,
        "violation_factor": spec.violation_factor,
        "violation_percentile": spec.violation_percentile,
        "burn_windows": list(spec.burn_windows),
        "degradation_percent": spec.degradation_percent,
        "severity": spec.severity,
        "renotify_minutes": spec.renotify_minutes,
        "notify_on_resolve": spec.notify_on_resolve,
        "no_data": spec.no_data,
        "no_data_after_s": spec.no_data_after_s,
        "enabled": spec.enabled,
    }


def _put(spec: AlertSpec) -> Callable[[Team], object]:
    """Create or update the rule. It is looked up when the step runs, because deleting a
    stage or pipeline earlier in the plan deletes the rules watching it."""

    def run(team: Team) -> AlertRule:
        fields = _fields(team, spec)
        rule = alert_rules_for_config(team=team).filter(slug=spec.slug).first()
        if rule is None:
            return alert_rule_create(team=team, slug=spec.slug, **fields)
        return alert_rule_update(rule=rule, **fields)

    return run


def _deleting(rule: AlertRule) -> Callable[[Team], object]:
    def run(team: Team) -> None:
        # Gone already when its pipeline was pruned earlier in the plan.
        current = alert_rules_for_config(team=team).filter(pk=rule.pk).first()
        if current is not None:
            alert_rule_delete(rule=current)

    return run


def plan_alerts(team: Team | None, spec: AlertsSpec, options: PlanOptions) -> Plan:
    current = {rule.slug: rule for rule in alert_rules_for_config(team=team)} if team else {}
    plan = Plan()
    for alert in spec.alerts:
        rule = current.get(alert.slug)
        if rule is None:
            plan.add(Step([f"+ alert {alert.slug}"], _put(alert), alert.line))
            continue
        old, new = _rule_view(rule), _spec_view(alert)
        changes = [
            f"~ alert {alert.slug}: {key} {old[key]} -> {new[key]}"
            for key in old
            if old[key] != new[key]
        ]
        if changes:
            plan.add(Step(changes, _put(alert), alert.line))
    listed = {alert.slug for alert in spec.alerts}
    for slug, rule in current.items():
        if slug in listed:
            continue
        if options.prune:
            plan.add(Step([f"- alert {slug}"], _deleting(rule)))
        else:
            plan.notes.append(f"= alert {slug}: not in the file, left alone (--prune deletes it)")
    return plan
