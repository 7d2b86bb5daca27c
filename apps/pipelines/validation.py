"""Checks shared by the forms, the REST API and configuration as code."""

import math
import re
from typing import Any

from django.core.exceptions import ValidationError

from apps.pipelines.models import PERCENTILES, NameMatch

ATTRIBUTE_VALUE_TYPES = (str, int, float, bool)


def validate_attributes(value: Any) -> dict[str, str | int | float | bool]:
    """Attribute equalities: a flat mapping of attribute key to a scalar value."""
    if not isinstance(value, dict):
        raise ValidationError("Attributes must be a mapping of attribute key to value.")
    for key, item in value.items():
        if not isinstance(key, str) or not key.strip():
            raise ValidationError("Attribute keys must be non-empty strings.")
        if item is None or not isinstance(item, ATTRIBUTE_VALUE_TYPES):
            raise ValidationError(
                f"Attribute “{key}” must equal a string, number or boolean, not {item!r}."
            )
    return value


def validate_regex(pattern: str) -> None:
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValidationError(f"Invalid regular expression “{pattern}”: {exc}.") from exc


def validate_span_name(pattern: str, name_match: str) -> None:
    if name_match == NameMatch.REGEX and pattern:
        validate_regex(pattern)


def validate_budget_mapping(value: Any, *, single: bool = False) -> dict[str, int]:
    """``{"p95": 2500}``: known percentiles, whole positive milliseconds."""
    if not isinstance(value, dict) or not value:
        raise ValidationError("A budget maps one or more of p50/p90/p95/p99 to milliseconds.")
    if single and len(value) != 1:
        raise ValidationError("A stage budget has exactly one percentile, e.g. {p95: 350}.")
    for percentile, ms in value.items():
        if percentile not in PERCENTILES:
            raise ValidationError(
                f"Unknown percentile “{percentile}”; use one of {', '.join(PERCENTILES)}."
            )
        if (
            isinstance(ms, bool)
            or not isinstance(ms, int | float)
            or not math.isfinite(ms)
            or ms != int(ms)
        ):
            raise ValidationError(f"Budget {percentile} must be a whole number of milliseconds.")
        if ms <= 0:
            raise ValidationError(f"Budget {percentile} must be positive, not {ms}.")
        if ms > 3_600_000:
            raise ValidationError(f"Budget {percentile} must be at most one hour (3600000 ms).")
    return {p: int(ms) for p, ms in value.items()}
