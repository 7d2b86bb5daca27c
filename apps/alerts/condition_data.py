"""A violation condition as the API and the configuration file both write it."""

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
