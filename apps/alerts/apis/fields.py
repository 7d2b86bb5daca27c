"""What the alerts API's serializers share: inputs strict about unknown keys, and a
rule's condition and scope as fields. A view nests the ``InputSerializer`` only it reads;
the answers are in ``serializers``."""

import re
from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.alerts.condition_data import degradation_condition_data, violation_condition_data
from apps.alerts.models import (
    AlertRule,
    ConditionKind,
    Severity,
)
from apps.alerts.rule_clean import alert_rule_clean, subject_message
from apps.core.percentiles import PERCENTILES

MAX_RULE_CHANNELS = 50
VIOLATION_AT_ONCE = {
    "condition": ConditionKind.VIOLATION,
    "violation_for_minutes": 0,
    "violation_factor": None,
    "violation_percentile": "",
    "burn_windows": [],
    "degradation_percent": None,
}
SCOPE_RE = re.compile(r"^(e2e|any_stage|stage:[-a-z0-9]{1,50})$")


class StrictInput(serializers.Serializer):
    """Refuses keys it does not know: a misspelt field would otherwise be dropped unseen.
    ``fixed`` names fields that exist but cannot change, with the reason."""

    fixed: Mapping[str, str] = {}

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            errors = {
                str(key): [self.fixed.get(str(key), "Unknown field.")]
                for key in data
                if key not in self.fields
            }
            if errors:
                raise serializers.ValidationError(errors)
        return super().to_internal_value(data)


# --- The condition and the scope of a rule ---------------------------------------------------

BURN_WINDOW_SCHEMA = {
    "type": "object",
    "properties": {
        "long_s": {"type": "integer", "minimum": 61},
        "short_s": {"type": "integer", "minimum": 60},
        "factor": {"type": "number", "minimum": 0, "exclusiveMinimum": True, "maximum": 1000},
        "severity": {"type": "string", "enum": list(Severity.values)},
    },
    "required": ["long_s", "short_s", "factor", "severity"],
    "additionalProperties": False,
}
CONDITION_SCHEMA = {
    "oneOf": [
        {
            "type": "object",
            "title": "violation",
            "properties": {
                "violation_for_minutes": {
                    "type": "integer",
                    "minimum": 0,
                    "maximum": AlertRule.MAX_VIOLATION_MINUTES,
                    "description": "How long a violation in scope must stay open; 0 fires at once.",
                },
                "factor": {
                    "type": "number",
                    "minimum": AlertRule.MIN_FACTOR,
                    "maximum": AlertRule.MAX_FACTOR,
                    "nullable": True,
                    "description": "Only while the percentile is at least this many times "
                    "its budget (two decimals at most).",
                },
                "percentile": {
                    "type": "string",
                    "enum": list(PERCENTILES),
                    "nullable": True,
                    "description": "Only the violations of this percentile's budget; left "
                    "out or null: any percentile.",
                },
            },
            "additionalProperties": False,
        },
        {
            "type": "object",
            "title": "burn_rate",
            "properties": {
                "burn_rate": {
                    "oneOf": [
                        {"type": "string", "enum": ["default"]},
                        {"type": "array", "items": BURN_WINDOW_SCHEMA, "maxItems": 6},
                    ],
                    "description": "“default”: the SRE workbook's three pairs; or your own.",
                }
            },
            "required": ["burn_rate"],
            "additionalProperties": False,
        },
        {
            "type": "object",
            "title": "degradation",
            "properties": {
                "degradation": {
                    "type": "object",
                    "properties": {
                        "over_percent": {
                            "type": "number",
                            "minimum": float(AlertRule.MIN_DEGRADATION_PERCENT),
                            "maximum": float(AlertRule.MAX_DEGRADATION_PERCENT),
                            "description": "Fires when at least this share of the requests "
                            "in the evaluation window had a run-time client's decision in "
                            "scope (one decimal at most).",
                        },
                        "for_minutes": {
                            "type": "integer",
                            "minimum": 0,
                            "maximum": AlertRule.MAX_VIOLATION_MINUTES,
                            "description": "How long the share must stay over; 0 (the "
                            "default) fires at once.",
                        },
                    },
                    "required": ["over_percent"],
                    "additionalProperties": False,
                }
            },
            "required": ["degradation"],
            "additionalProperties": False,
        },
    ],
    "example": {"violation_for_minutes": 2, "factor": 1.5},
}


def _invalid(message: str) -> serializers.ValidationError:
    return serializers.ValidationError(message)


# The condition's keys, by the rule field each one sets.
CONDITION_KEYS = {
    "violation_for_minutes": "violation_for_minutes",
    "violation_factor": "factor",
    "violation_percentile": "percentile",
}
DEGRADATION_KEYS = {"degradation_percent": "over_percent", "violation_for_minutes": "for_minutes"}
CONDITIONS = ("burn_rate", "degradation")
_EXAMPLES = (
    '{"violation_for_minutes": 2}, {"burn_rate": "default"} or '
    '{"degradation": {"over_percent": 20, "for_minutes": 5}}'
)


def condition_clean(
    fields: dict[str, Any], keys: Mapping[str, str] = CONDITION_KEYS
) -> dict[str, Any]:
    """The condition's fields checked by ``alert_rule_clean``, its errors said of the keys
    the API names (``keys``, by rule field; a burn window's message names its window)."""
    try:
        return alert_rule_clean(fields)
    except DjangoValidationError as exc:
        messages = [
            subject_message(keys[name], message) if name in keys else message
            for name, errors in exc.message_dict.items()
            for message in errors
        ]
        raise serializers.ValidationError(messages) from None


def _degradation(data: Any) -> dict[str, Any]:
    if not isinstance(data, Mapping):
        raise _invalid('degradation is an object: {"over_percent": 20, "for_minutes": 5}.')
    unknown = sorted(set(data) - set(DEGRADATION_KEYS.values()))
    if unknown:
        raise _invalid(f"Unknown key {', '.join(map(str, unknown))} in degradation.")
    fields = {
        "condition": ConditionKind.DEGRADATION,
        "degradation_percent": data.get("over_percent"),
        "violation_for_minutes": data.get("for_minutes", 0),
    }
    return {
        **condition_clean(fields, DEGRADATION_KEYS),
        "violation_factor": None,
        "violation_percentile": "",
        "burn_windows": [],
    }


@extend_schema_field(CONDITION_SCHEMA)
class ConditionField(serializers.Field):
    """``{"violation_for_minutes": 2, "factor": 1.5}``, ``{"burn_rate": "default"}``,
    ``{"burn_rate": [{"long_s": 3600, "short_s": 300, "factor": 14.4, "severity": …}]}``
    or ``{"degradation": {"over_percent": 20, "for_minutes": 5}}``; read as the rule
    fields the services take, the whole condition at once."""

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        if not isinstance(data, Mapping) or not data:
            raise _invalid(f"A condition is an object: {_EXAMPLES}.")
        unknown = sorted(set(data) - {*CONDITION_KEYS.values(), *CONDITIONS})
        if unknown:
            raise _invalid(f"Unknown key {', '.join(map(str, unknown))}.")
        kind = next((key for key in CONDITIONS if key in data), None)
        if kind is not None and len(data) > 1:
            other = next(str(key) for key in data if key != kind)
            raise _invalid(
                "A condition is a violation (violation_for_minutes, factor, percentile), a "
                f"burn_rate or a degradation: not both {kind} and {other}."
            )
        if kind == "degradation":
            return _degradation(data["degradation"])
        if kind == "burn_rate":
            windows = data["burn_rate"]
            if windows == "default":
                windows = []
            elif not isinstance(windows, list):
                raise _invalid("burn_rate is “default” or a list of window pairs.")
            return {
                "condition": ConditionKind.BURN_RATE,
                **condition_clean({"burn_windows": windows}),
                "degradation_percent": None,
            }
        fields = {
            "violation_for_minutes": data.get("violation_for_minutes", 0),
            "violation_factor": data.get("factor"),
            "violation_percentile": data.get("percentile"),
        }
        return {
            "condition": ConditionKind.VIOLATION,
            **condition_clean(fields),
            "burn_windows": [],
            "degradation_percent": None,
        }

    def to_representation(self, rule: AlertRule) -> dict[str, Any]:
        if rule.condition == ConditionKind.BURN_RATE:
            return {"burn_rate": list(rule.burn_windows) or "default"}
        if rule.condition == ConditionKind.DEGRADATION:
            return degradation_condition_data(rule)
        return violation_condition_data(rule)


class ScopeField(serializers.CharField):
    """``e2e``, ``any_stage`` or ``stage:<stage slug>``."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_length", 60)
        kwargs.setdefault(
            "help_text", "`e2e` (the end-to-end budget), `any_stage`, or `stage:<slug>`."
        )
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data)
        if not SCOPE_RE.match(value):
            raise _invalid("Use e2e, any_stage or stage:<stage slug>.")
        return value
