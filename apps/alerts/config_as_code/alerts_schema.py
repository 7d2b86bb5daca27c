"""The ``alerts:`` section: when to tell whom, from nodes to specs.

What a rule names (its pipeline, stage and channels) is checked later, in
``references.py``, once the team is known: it may be in the database or in the file.
"""

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError

from apps.alerts.burn_windows import BurnWindow
from apps.alerts.config_as_code.common import (
    check_unique,
    is_whole,
    line_of,
    read_duration,
    read_slug,
    rule_value,
)
from apps.alerts.config_as_code.condition_schema import parse_condition
from apps.alerts.models import ConditionKind, NoDataPolicy, RuleScope, Severity
from apps.alerts.rule_clean import alert_rule_clean
from apps.pipelines.config_as_code.loader import Item, Node, Scalar
from apps.pipelines.config_as_code.reader import Reader, suggest
from apps.teams.models import slug_validator

ALERT_KEYS = (
    "slug",
    "name",
    "pipeline",
    "scope",
    "condition",
    "severity",
    "channels",
    "renotify",
    "notify_on_resolve",
    "no_data",
    "no_data_after",
    "enabled",
)
SCOPES = ("e2e", "any_stage", "stage:<slug>")
STAGE_PREFIX = "stage:"
DEFAULT_RENOTIFY_MINUTES = 240


@dataclass(frozen=True)
class AlertSpec:
    line: int
    slug: str
    pipeline: str
    slug_line: int = 0
    pipeline_line: int = 0
    name: str = ""
    scope: str = RuleScope.E2E
    stage: str = ""
    scope_line: int = 0
    condition: str = ConditionKind.VIOLATION
    condition_line: int = 0
    violation_for_minutes: int = 0
    violation_factor: Decimal | None = None
    violation_percentile: str = ""
    burn_windows: list[BurnWindow] = field(default_factory=list)
    degradation_percent: Decimal | None = None
    severity: str = Severity.WARNING
    # Channel slugs, each with the line that names it.
    channels: tuple[tuple[str, int], ...] = ()
    renotify_minutes: int = DEFAULT_RENOTIFY_MINUTES
    notify_on_resolve: bool = True
    no_data: str = NoDataPolicy.RESOLVE
    no_data_after_s: int | None = None
    enabled: bool = True

    @property
    def channel_slugs(self) -> list[str]:
        return sorted(slug for slug, _ in self.channels)


@dataclass(frozen=True)
class AlertsSpec:
    line: int
    alerts: list[AlertSpec]


def _boolean(reader: Reader, item: Item) -> bool | None:
    value = reader.scalar(item)
    if not isinstance(value, bool):
        if isinstance(item.value, Scalar):
            reader.error(item.value.line, f"“{item.key}” must be true or false.")
        return None
    return value


def _renotify(reader: Reader, item: Item) -> int | None:
    value = reader.scalar(item)
    if value == "never" or (is_whole(value) and value == 0):
        return 0
    seconds = read_duration(reader, item)
    if seconds is None:
        return None
    if seconds % 60:
        reader.error(item.value.line, "“renotify” is in whole minutes (e.g. 30m or 4h), or never.")
        return None
    minutes: int | None = rule_value(reader, item, "renotify_minutes", seconds // 60)
    return minutes


def _no_data_after(reader: Reader, item: Item) -> int | None:
    seconds = read_duration(reader, item)
    if seconds is None:
        return None
    checked: int | None = rule_value(reader, item, "no_data_after_s", seconds)
    return checked


def _scope(reader: Reader, item: Item) -> tuple[str, str]:
    """The scope and, for ``stage:<slug>``, the stage's slug."""
    value = reader.text(item)
    if value is None:
        return RuleScope.E2E, ""
    if value.startswith(STAGE_PREFIX):
        slug = value[len(STAGE_PREFIX) :].strip()
        try:
            slug_validator(slug)
        except ValidationError:
            reader.error(
                item.value.line,
                f"“{value}” does not name a stage: write stage:<slug>, e.g. stage:retrieval.",
            )
            return RuleScope.STAGE, ""
        return RuleScope.STAGE, slug
    if value not in (RuleScope.E2E, RuleScope.ANY_STAGE):
        reader.error(
            item.value.line,
            f"Unknown scope “{value}”; use one of {', '.join(SCOPES)}.{suggest(value, SCOPES)}",
        )
        return RuleScope.E2E, ""
    return value, ""


def _channels(reader: Reader, item: Item) -> tuple[tuple[str, int], ...]:
    slugs: list[tuple[str, int]] = []
    for node in reader.sequence(item, what="channel slugs"):
        slug = read_slug(reader, Item("channels", node.line, node))
        if slug:
            slugs.append((slug, node.line))
    check_unique(reader, slugs, "channel", " in this alert")
    return tuple(slugs)


def _alert(reader: Reader, node: Node) -> AlertSpec:
    entries = reader.mapping(node, what="alert", keys=ALERT_KEYS, required=("slug", "pipeline"))
    if entries is None:
        return AlertSpec(node.line, "", "")
    fields: dict[str, Any] = {}
    if "name" in entries:
        fields["name"] = reader.text(entries["name"], max_length=100) or ""
    if "severity" in entries:
        fields["severity"] = reader.choice(entries["severity"], Severity.values) or Severity.WARNING
    if "scope" in entries:
        fields["scope"], fields["stage"] = _scope(reader, entries["scope"])
    if "condition" in entries:
        severity = fields.get("severity", Severity.WARNING)
        fields.update(parse_condition(reader, entries["condition"], severity))
    if "scope" in entries and "condition" in fields:
        reader.validated(
            entries["scope"].value.line,
            lambda: alert_rule_clean({"condition": fields["condition"], "scope": fields["scope"]}),
        )
    if "channels" in entries:
        fields["channels"] = _channels(reader, entries["channels"])
    if "renotify" in entries:
        fields["renotify_minutes"] = _renotify(reader, entries["renotify"])
    if "no_data" in entries:
        fields["no_data"] = reader.choice(entries["no_data"], NoDataPolicy.values)
    if "no_data_after" in entries:
        fields["no_data_after_s"] = _no_data_after(reader, entries["no_data_after"])
    for key in ("notify_on_resolve", "enabled"):
        if key in entries:
            fields[key] = _boolean(reader, entries[key])
    return AlertSpec(
        line=node.line,
        slug=read_slug(reader, entries.get("slug")),
        pipeline=read_slug(reader, entries.get("pipeline")),
        slug_line=line_of(entries.get("slug"), node),
        pipeline_line=line_of(entries.get("pipeline"), node),
        scope_line=line_of(entries.get("scope"), node),
        condition_line=line_of(entries.get("condition"), node),
        **{key: value for key, value in fields.items() if value is not None},
    )


def parse_alerts(item: Item, reader: Reader) -> AlertsSpec:
    alerts = [_alert(reader, node) for node in reader.sequence(item, what="alerts")]
    check_unique(reader, [(a.slug, a.slug_line) for a in alerts], "alert slug")
    return AlertsSpec(line=item.key_line, alerts=alerts)
