"""Violation and degradation conditions as the API and the configuration file both write
them (burn windows differ: seconds in the API, durations in the file)."""

from decimal import Decimal
from typing import Any

from apps.alerts.models import AlertRule


def violation_condition_data(rule: AlertRule) -> dict[str, Any]:
    """``{"violation_for_minutes": 2, "factor": 1.5, "percentile": "p99"}``, the optional
    keys only when set."""
    condition: dict[str, Any] = {"violation_for_minutes": rule.violation_for_minutes}
    if rule.violation_factor is not None:
        condition["factor"] = float(rule.violation_factor)
    if rule.violation_percentile:
        condition["percentile"] = rule.violation_percentile
    return condition


def _number(value: Decimal) -> int | float:
    """20 for 20.0, 12.5 as it is: the file and the API write what was set."""
    return int(value) if value == value.to_integral_value() else float(value)


def degradation_condition_data(rule: AlertRule) -> dict[str, Any]:
    """``{"degradation": {"over_percent": 20, "for_minutes": 5}}``."""
    assert rule.degradation_percent is not None
    return {
        "degradation": {
            "over_percent": _number(rule.degradation_percent),
            "for_minutes": rule.violation_for_minutes,
        }
    }
