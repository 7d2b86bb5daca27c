"""Small reads shared by the ``channels:`` and ``alerts:`` schemas, and a rule's values
checked by ``alert_rule_clean`` with its errors said in the file's words."""

import math
from typing import Any

from django.core.exceptions import ValidationError

from apps.alerts.config_as_code.durations import EXAMPLE, duration_seconds, duration_text
from apps.alerts.rule_clean import OUT_OF_RANGE, alert_rule_clean, subject_message
from apps.pipelines.config_as_code.loader import Item, Node, Scalar
from apps.pipelines.config_as_code.reader import Reader, describe
from apps.teams.models import slug_validator


def read_slug(reader: Reader, item: Item | None) -> str:
    if item is None:
        return ""
    return reader.text(item, max_length=50, check=slug_validator) or ""


def line_of(item: Item | None, node: Node) -> int:
    return item.value.line if item is not None else node.line


def check_unique(reader: Reader, slugs: list[tuple[str, int]], what: str, where: str = "") -> None:
    seen: dict[str, int] = {}
    for slug, line in slugs:
        if not slug:
            continue
        if slug in seen:
            reader.error(line, f"Duplicate {what} “{slug}”{where} (first at line {seen[slug]}).")
        else:
            seen[slug] = line


def is_whole(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value == int(value)
    )


def read_duration(reader: Reader, item: Item) -> int | None:
    """Whole seconds from text such as ``15m``; problems are reported at the value's line."""
    value = reader.scalar(item)
    seconds = duration_seconds(value) if isinstance(value, str) else None
    if seconds is None:
        if isinstance(item.value, Scalar):
            shown = f"“{value}”" if isinstance(value, str) else describe(item.value)
            reader.error(
                item.value.line,
                f"“{item.key}” must be a duration such as {EXAMPLE}, not {shown}.",
            )
        return None
    return seconds


# Keys whose values the file writes as durations (``30s``, ``4h``).
DURATION_KEYS = ("renotify", "no_data_after")


def rule_value(reader: Reader, item: Item, field: str, value: Any) -> Any:
    """``value`` for the rule's ``field`` as ``alert_rule_clean`` stores it; its errors are
    reported at the value's line, said of the file's key, a range of durations in the
    file's units."""
    try:
        return alert_rule_clean({field: value})[field]
    except ValidationError as exc:
        for error in exc.error_dict[field]:
            reader.error(item.value.line, _said_of(item.key, error))
        return None


def _said_of(key: str, error: ValidationError) -> str:
    params = error.params or {}
    seconds = {"s": 1, "min": 60}.get(params.get("unit", ""))
    if error.code == OUT_OF_RANGE and seconds and key in DURATION_KEYS:
        low, high = params["low"] * seconds, params["high"] * seconds
        if low == 0:
            return f"“{key}” must be at most {duration_text(high)}, or never."
        return f"“{key}” must be between {duration_text(low)} and {duration_text(high)}."
    return subject_message(f"“{key}”", " ".join(error.messages))
