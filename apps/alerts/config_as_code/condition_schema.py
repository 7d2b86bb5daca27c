"""An alert rule's ``condition:``: a budget violation held for some minutes, an
objective's burn rate over pairs of windows, or a degradation rate over a percentage."""

from decimal import Decimal
from typing import Any

from apps.alerts.burn_windows import BurnWindow, burn_windows_clean
from apps.alerts.config_as_code.common import is_whole, read_duration, rule_value
from apps.alerts.models import ConditionKind, Severity
from apps.pipelines.config_as_code.loader import Item, Node, Scalar
from apps.pipelines.config_as_code.reader import Reader

CONDITION_KEYS = ("violation_for_minutes", "factor", "percentile", "burn_rate", "degradation")
VIOLATION_KEYS = ("violation_for_minutes", "factor", "percentile")
KINDS = ("burn_rate", "degradation")
BURN_WINDOW_KEYS = ("long", "short", "factor", "severity")
DEGRADATION_KEYS = ("over_percent", "for_minutes")


def _violation_minutes(reader: Reader, item: Item) -> int:
    value = reader.scalar(item)
    if not isinstance(item.value, Scalar):
        return 0
    minutes = rule_value(
        reader, item, "violation_for_minutes", int(value) if is_whole(value) else value
    )
    return 0 if minutes is None else int(minutes)


def _factor(reader: Reader, item: Item) -> Decimal | None:
    value = reader.scalar(item)
    if not isinstance(item.value, Scalar):
        return None
    factor: Decimal | None = rule_value(reader, item, "violation_factor", value)
    return factor


def _burn_window(reader: Reader, node: Node, severity: str) -> dict[str, Any] | None:
    entries = reader.mapping(
        node, what="burn-rate window", keys=BURN_WINDOW_KEYS, required=("long", "short", "factor")
    )
    if entries is None or not {"long", "short", "factor"} <= set(entries):
        return None
    long_s, short_s = (
        read_duration(reader, entries["long"]),
        read_duration(reader, entries["short"]),
    )
    factor = reader.scalar(entries["factor"])
    if isinstance(factor, bool) or not isinstance(factor, int | float):
        reader.error(entries["factor"].value.line, "A burn-rate factor is a number, such as 14.4.")
        return None
    if "severity" in entries:
        severity = reader.choice(entries["severity"], Severity.values) or severity
    if long_s is None or short_s is None:
        return None
    return {"long_s": long_s, "short_s": short_s, "factor": factor, "severity": severity}


def _burn_windows(reader: Reader, item: Item, severity: str) -> list[BurnWindow]:
    if isinstance(item.value, Scalar):
        if item.value.value != "default":
            reader.error(
                item.value.line,
                "“burn_rate” is default or a list of windows, such as "
                "[{long: 1h, short: 5m, factor: 14.4, severity: critical}].",
            )
        return []
    nodes = reader.sequence(item, what="burn-rate windows")
    pairs = [_burn_window(reader, node, severity) for node in nodes]
    read = [pair for pair in pairs if pair is not None]
    if len(read) < len(pairs):
        return []
    windows: list[BurnWindow] | None = reader.validated(
        item.key_line, lambda: burn_windows_clean(read)
    )
    return windows or []


def _degradation(reader: Reader, item: Item) -> dict[str, Any]:
    fields: dict[str, Any] = {"condition": ConditionKind.DEGRADATION}
    entries = reader.mapping(
        item.value, what="degradation condition", keys=DEGRADATION_KEYS, required=("over_percent",)
    )
    if entries is None:
        return fields
    if "over_percent" in entries:
        value = reader.scalar(entries["over_percent"])
        if isinstance(entries["over_percent"].value, Scalar):
            percent = rule_value(reader, entries["over_percent"], "degradation_percent", value)
            fields["degradation_percent"] = percent
    if "for_minutes" in entries:
        fields["violation_for_minutes"] = _violation_minutes(reader, entries["for_minutes"])
    return fields


def parse_condition(reader: Reader, item: Item, severity: str) -> dict[str, Any]:
    entries = reader.mapping(item.value, what="condition", keys=CONDITION_KEYS)
    if entries is None:
        return {}
    kind = next((key for key in KINDS if key in entries), None)
    if kind is not None:
        others = [key for key in entries if key != kind]
        if others:
            reader.error(
                entries[others[0]].key_line,
                "A condition is a budget violation (violation_for_minutes, factor, percentile), "
                f"an objective's burn_rate or a degradation, not both {kind} and {others[0]}.",
            )
    if kind == "degradation":
        return _degradation(reader, entries["degradation"])
    if kind == "burn_rate":
        return {
            "condition": ConditionKind.BURN_RATE,
            "burn_windows": _burn_windows(reader, entries["burn_rate"], severity),
        }
    if not entries:
        reader.error(
            item.value.line,
            "A condition needs violation_for_minutes (e.g. {violation_for_minutes: 2}), "
            "burn_rate (e.g. {burn_rate: default}) or degradation (e.g. "
            "{degradation: {over_percent: 20, for_minutes: 5}}).",
        )
    fields: dict[str, Any] = {"condition": ConditionKind.VIOLATION}
    if "violation_for_minutes" in entries:
        fields["violation_for_minutes"] = _violation_minutes(
            reader, entries["violation_for_minutes"]
        )
    if "factor" in entries:
        fields["violation_factor"] = _factor(reader, entries["factor"])
    if "percentile" in entries:
        percentile = rule_value(
            reader,
            entries["percentile"],
            "violation_percentile",
            reader.scalar(entries["percentile"]),
        )
        fields["violation_percentile"] = percentile or ""
    return fields
