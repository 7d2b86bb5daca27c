"""Checks shared by the forms, the REST API and configuration as code."""

import math
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from apps.core.percentiles import PERCENTILES
from apps.pipelines.models import NameMatch, Pipeline
from apps.pipelines.name_patterns import name_pattern

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


def validate_attributes_storable(value: dict[str, Any]) -> None:
    """What jsonb cannot keep as it was given: checked where attributes are saved."""
    for key, item in value.items():
        if "\x00" in key or (isinstance(item, str) and "\x00" in item):
            raise ValidationError("Attribute keys and values cannot contain the NUL character.")
        if isinstance(item, float) and not math.isfinite(item):
            raise ValidationError(f"Attribute “{key}” must equal a finite number, not {item!r}.")


def _quoted(pattern: str) -> str:
    return pattern if len(pattern) <= 60 else f"{pattern[:60]}…"


def validate_span_name(pattern: str, name_match: str) -> None:
    """A glob or regex the matcher can run: RE2 syntax, within the length and size bounds."""
    if not pattern or name_match not in NameMatch.values:
        return  # an unknown name_match is the model's choices to report
    problem = name_pattern(pattern=pattern, kind=name_match).problem
    if problem is not None:
        what = "regular expression" if name_match == NameMatch.REGEX else "glob"
        raise ValidationError(f"Invalid {what} “{_quoted(pattern)}”: {problem}.")


def validate_regex(pattern: str) -> None:
    validate_span_name(pattern, NameMatch.REGEX)


def validate_glob(pattern: str) -> None:
    validate_span_name(pattern, NameMatch.GLOB)


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


@dataclass(frozen=True)
class EvaluationSetting:
    """A budget-evaluation setting: its name in the API and config files, and its bounds."""

    key: str
    field: str
    unit: str
    default: int
    minimum: int
    maximum: int


def _evaluation_setting(key: str, field: str, unit: str) -> EvaluationSetting:
    # The model's validators are the one source of the bounds; every surface reads them here.
    model_field = Pipeline._meta.get_field(field)
    assert isinstance(model_field, models.IntegerField)
    limits = {
        type(v): v.limit_value
        for v in model_field.validators
        if isinstance(v, MinValueValidator | MaxValueValidator)
    }
    return EvaluationSetting(
        key=key,
        field=field,
        unit=unit,
        default=model_field.get_default(),
        minimum=limits[MinValueValidator],
        maximum=limits[MaxValueValidator],
    )


EVALUATION_SETTINGS = (
    _evaluation_setting("window_s", "evaluation_window_s", "seconds"),
    _evaluation_setting("min_samples", "min_samples", "samples"),
    _evaluation_setting("close_after", "close_after", "evaluations"),
)


def validate_evaluation_value(setting: EvaluationSetting, value: Any) -> int:
    """A whole number within the setting's bounds; ``True`` and ``300.5`` are refused."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value != int(value)
    ):
        raise ValidationError(f"{setting.key} must be a whole number of {setting.unit}.")
    if not setting.minimum <= value <= setting.maximum:
        raise ValidationError(
            f"{setting.key} must be between {setting.minimum} and {setting.maximum}"
            f" {setting.unit}, not {value}."
        )
    return int(value)
