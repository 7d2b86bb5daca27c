"""An alert rule's own values, checked in one place for every door.

The form, the API and the configuration file each read their input shape (a form
field, a JSON object, a YAML duration) into the rule's fields and call
``alert_rule_clean``; it returns the values as stored or raises one ValidationError
naming each field that is wrong. Messages are predicates ("Must be …"), so that each
door can put them under its field or after its own key (``subject_message``); the
bounds are the model's constants, and an out-of-range error carries them as params
(``low``, ``high``, ``unit``) for a door that writes them in its own units.

What needs the database (a pipeline of the team, its stage, its objective, the
team's channels) is the services' to check: this function reads nothing.
"""

import math
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from django.core.exceptions import ValidationError

from apps.alerts.burn_windows import burn_windows_clean
from apps.alerts.models import AlertRule, ConditionKind, NoDataPolicy, RuleScope, Severity
from apps.core.percentiles import PERCENTILES

OUT_OF_RANGE = "out_of_range"
BURN_RATE_SCOPE = (
    "A burn-rate condition watches the pipeline's objective, which is end to end: use scope e2e."
)
BURN_RATE_PERCENTILE = "Belongs to a violation condition: a burn rate watches the objective."
_CHOICES = {
    "scope": RuleScope.values,
    "condition": ConditionKind.values,
    "severity": Severity.values,
    "no_data": NoDataPolicy.values,
}


def subject_message(subject: str, message: str) -> str:
    """``Must be …`` said of a door's own name for the field: ``“renotify” must be …``."""
    return f"{subject} {continued(message)}"


def continued(message: str) -> str:
    """A message that starts a sentence, made to continue one: ``a signing secret is …``."""
    return f"{message[:1].lower()}{message[1:]}"


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _within(value: Any, low: int, high: int, unit: str, text: str) -> int:
    if not _whole(value) or not low <= value <= high:
        raise ValidationError(
            text, code=OUT_OF_RANGE, params={"low": low, "high": high, "unit": unit}
        )
    return int(value)


def _factor(value: Any) -> Decimal | None:
    if value is None or value == "":
        return None
    number: Decimal | None = None
    if not isinstance(value, bool) and isinstance(value, int | float | str | Decimal):
        try:
            number = Decimal(str(value).strip())
        except InvalidOperation:
            number = None
    if number is None or not number.is_finite():
        raise ValidationError("Must be a number of times the budget, such as 1.5.", code="invalid")
    low, high = AlertRule.MIN_FACTOR, AlertRule.MAX_FACTOR
    if not low <= number <= high:
        shown = value if isinstance(value, int | float) and math.isfinite(value) else number
        raise ValidationError(
            f"Must be between {low} and {high} times the budget, not {shown}.",
            code=OUT_OF_RANGE,
            params={"low": low, "high": high, "unit": "times"},
        )
    if number != number.quantize(Decimal(1).scaleb(-AlertRule.FACTOR_DECIMALS)):
        raise ValidationError(f"Has at most {AlertRule.FACTOR_DECIMALS} decimals.", code="decimals")
    return number


def _one(name: str, value: Any) -> Any:
    if name in _CHOICES:
        if value not in _CHOICES[name]:
            raise ValidationError(
                f"Must be one of {', '.join(_CHOICES[name])}.", code="invalid_choice"
            )
        return value
    if name == "violation_for_minutes":
        high = AlertRule.MAX_VIOLATION_MINUTES
        return _within(
            value, 0, high, "min", f"Must be a whole number of minutes between 0 and {high}."
        )
    if name == "violation_factor":
        return _factor(value)
    if name == "violation_percentile":
        if value is None or value == "":
            return ""
        if value not in PERCENTILES:
            raise ValidationError(
                f"Must be one of {', '.join(PERCENTILES)}, or empty for any percentile.",
                code="invalid_choice",
            )
        return value
    if name == "renotify_minutes":
        high = AlertRule.MAX_RENOTIFY_MINUTES
        return _within(
            value,
            0,
            high,
            "min",
            f"Must be a whole number of minutes between 0 (never remind) and {high}.",
        )
    if name == "no_data_after_s":
        if value is None or value == "":
            return None
        low, high = AlertRule.MIN_NO_DATA_AFTER_S, AlertRule.MAX_NO_DATA_AFTER_S
        return _within(
            value,
            low,
            high,
            "s",
            f"Must be a whole number of seconds between {low} and {high}, or empty for "
            "three of the pipeline's evaluation windows.",
        )
    if name == "burn_windows":
        return burn_windows_clean(value)
    return value


def alert_rule_clean(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` (any of the rule's fields) as stored, or ValidationError by field."""
    cleaned: dict[str, Any] = {}
    errors: dict[str, list[ValidationError]] = {}
    for name, value in values.items():
        try:
            cleaned[name] = _one(name, value)
        except ValidationError as exc:
            errors[name] = exc.error_list
    burn_rate = cleaned.get("condition") == ConditionKind.BURN_RATE
    if burn_rate and cleaned.get("scope", RuleScope.E2E) != RuleScope.E2E:
        errors.setdefault("scope", []).append(ValidationError(BURN_RATE_SCOPE, code="scope"))
    if burn_rate and cleaned.get("violation_percentile"):
        errors.setdefault("violation_percentile", []).append(
            ValidationError(BURN_RATE_PERCENTILE, code="burn_rate")
        )
    if errors:
        raise ValidationError(errors)
    return cleaned
