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
DEGRADATION_REQUIRED = (
    "Must be given for a degradation condition: the share of requests with a decision, such as 20."
)
DEGRADATION_ONLY = {
    ConditionKind.VIOLATION: "Belongs to a degradation condition: a violation compares a "
    "percentile with its budget.",
    ConditionKind.BURN_RATE: "Belongs to a degradation condition: a burn rate watches the "
    "objective.",
}
VIOLATION_ONLY = (
    "Belongs to a violation condition: a degradation rate has no budget to compare with."
)
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


def _decimal(
    value: Any, *, low: Decimal | int, high: Decimal | int, decimals: int, unit: str, invalid: str
) -> Decimal | None:
    """A number of at most ``decimals`` decimals within ``[low, high]``, or None when empty."""
    if value is None or value == "":
        return None
    number: Decimal | None = None
    if not isinstance(value, bool) and isinstance(value, int | float | str | Decimal):
        try:
            number = Decimal(str(value).strip())
        except InvalidOperation:
            number = None
    if number is None or not number.is_finite():
        raise ValidationError(invalid, code="invalid")
    if not low <= number <= high:
        shown = value if isinstance(value, int | float) and math.isfinite(value) else number
        said = f"Must be between {low} and {high} {unit}, not {shown}."
        raise ValidationError(
            # Django puts the params into the message with %: a % of its own is doubled.
            said.replace("%", "%%"),
            code=OUT_OF_RANGE,
            params={"low": low, "high": high, "unit": unit},
        )
    if number != number.quantize(Decimal(1).scaleb(-decimals)):
        said = "decimal" if decimals == 1 else "decimals"
        raise ValidationError(f"Has at most {decimals} {said}.", code="decimals")
    return number


def _factor(value: Any) -> Decimal | None:
    return _decimal(
        value,
        low=AlertRule.MIN_FACTOR,
        high=AlertRule.MAX_FACTOR,
        decimals=AlertRule.FACTOR_DECIMALS,
        unit="times the budget",
        invalid="Must be a number of times the budget, such as 1.5.",
    )


def _degradation_percent(value: Any) -> Decimal | None:
    return _decimal(
        value,
        low=AlertRule.MIN_DEGRADATION_PERCENT,
        high=AlertRule.MAX_DEGRADATION_PERCENT,
        decimals=AlertRule.DEGRADATION_DECIMALS,
        unit="% of requests",
        invalid="Must be a percentage of requests, such as 20.",
    )


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
    if name == "degradation_percent":
        return _degradation_percent(value)
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
    for name, message in _across(values, cleaned, errors):
        errors.setdefault(name, []).append(ValidationError(message, code="condition"))
    if errors:
        raise ValidationError(errors)
    return cleaned


def _across(
    values: Mapping[str, Any], cleaned: dict[str, Any], errors: Mapping[str, Any]
) -> list[tuple[str, str]]:
    """What the condition says of the other fields given with it: (field, message)."""
    condition = cleaned.get("condition")
    found: list[tuple[str, str]] = []
    if condition == ConditionKind.BURN_RATE:
        if cleaned.get("scope", RuleScope.E2E) != RuleScope.E2E:
            found.append(("scope", BURN_RATE_SCOPE))
        if cleaned.get("violation_percentile"):
            found.append(("violation_percentile", BURN_RATE_PERCENTILE))
    if condition == ConditionKind.DEGRADATION:
        # Given and empty: a degradation rule without its threshold would never be judged.
        if (
            "degradation_percent" in values
            and "degradation_percent" not in errors
            and cleaned["degradation_percent"] is None
        ):
            found.append(("degradation_percent", DEGRADATION_REQUIRED))
        if cleaned.get("violation_factor") is not None:
            found.append(("violation_factor", VIOLATION_ONLY))
        if cleaned.get("violation_percentile"):
            found.append(("violation_percentile", VIOLATION_ONLY))
    elif condition in DEGRADATION_ONLY and cleaned.get("degradation_percent") is not None:
        found.append(("degradation_percent", DEGRADATION_ONLY[condition]))
    return found
