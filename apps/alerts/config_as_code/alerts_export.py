"""The ``alerts:`` section as data; keys at their defaults are left out, the condition never."""

from typing import Any

from apps.alerts.condition_data import degradation_condition_data, violation_condition_data
from apps.alerts.config_as_code.alerts_schema import DEFAULT_RENOTIFY_MINUTES
from apps.alerts.config_as_code.durations import duration_text
from apps.alerts.config_as_code.selectors import alert_rules_for_config
from apps.alerts.models import AlertRule, ConditionKind, NoDataPolicy, RuleScope, Severity
from apps.teams.models import Team


def _condition(rule: AlertRule) -> dict[str, Any]:
    if rule.condition == ConditionKind.BURN_RATE:
        if not rule.burn_windows:
            return {"burn_rate": "default"}
        return {
            "burn_rate": [
                {
                    "long": duration_text(window["long_s"]),
                    "short": duration_text(window["short_s"]),
                    "factor": window["factor"],
                    "severity": window["severity"],
                }
                for window in rule.burn_windows
            ]
        }
    if rule.condition == ConditionKind.DEGRADATION:
        return degradation_condition_data(rule)
    return violation_condition_data(rule)


def _alert(rule: AlertRule) -> dict[str, Any]:
    data: dict[str, Any] = {"slug": rule.slug}
    if rule.name:
        data["name"] = rule.name
    data["pipeline"] = rule.pipeline.slug
    if rule.scope == RuleScope.STAGE and rule.stage is not None:
        data["scope"] = f"stage:{rule.stage.slug}"
    elif rule.scope != RuleScope.E2E:
        data["scope"] = rule.scope
    data["condition"] = _condition(rule)
    if rule.severity != Severity.WARNING:
        data["severity"] = rule.severity
    channels = [channel.slug for channel in rule.channels.all()]
    if channels:
        data["channels"] = channels
    if rule.renotify_minutes != DEFAULT_RENOTIFY_MINUTES:
        data["renotify"] = (
            duration_text(rule.renotify_minutes * 60) if rule.renotify_minutes else "never"
        )
    if not rule.notify_on_resolve:
        data["notify_on_resolve"] = False
    if rule.no_data != NoDataPolicy.RESOLVE:
        data["no_data"] = rule.no_data
    if rule.no_data_after_s is not None:
        data["no_data_after"] = duration_text(rule.no_data_after_s)
    if not rule.enabled:
        data["enabled"] = False
    return data


def export_alerts(team: Team) -> list[dict[str, Any]] | None:
    alerts = [_alert(rule) for rule in alert_rules_for_config(team=team)]
    return alerts or None
