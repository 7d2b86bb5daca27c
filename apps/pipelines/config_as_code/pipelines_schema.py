"""The ``pipelines:`` section: from nodes to the desired pipelines, stages and rules."""

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from functools import partial
from typing import Any

from django.conf import settings

from apps.core.percentiles import PERCENTILES
from apps.pipelines.config_as_code.loader import Item, Mapping, Node, Scalar
from apps.pipelines.config_as_code.reader import Reader, suggest
from apps.pipelines.degrade_policy import KEYS as DEGRADE_KEYS
from apps.pipelines.degrade_policy import degrade_policy_clean
from apps.pipelines.models import NameMatch, Portion, SpanKind
from apps.pipelines.stream_budget import KEYS as STREAM_KEYS
from apps.pipelines.stream_budget import PERCENTILES as STREAM_PERCENTILES
from apps.pipelines.stream_budget import stream_budget_clean
from apps.pipelines.validation import (
    EVALUATION_SETTINGS,
    validate_attributes,
    validate_budget_mapping,
    validate_evaluation_value,
    validate_glob,
    validate_regex,
)
from apps.teams.models import slug_validator

PIPELINE_KEYS = (
    "slug",
    "name",
    "description",
    "match",
    "budget",
    "objective",
    "evaluation",
    "stages",
    "no_stage",
)
PIPELINE_MATCH_KEYS = ("service", "root_span", "attributes")
OBJECTIVE_KEYS = ("target", "threshold_ms")
EVALUATION_KEYS = tuple(setting.key for setting in EVALUATION_SETTINGS)
STAGE_KEYS = ("slug", "name", "budget", "stream_budget", "degrade", "match")
RULE_KEYS = (
    "span_name",
    "span_name_regex",
    "attributes",
    "span_kind",
    "service",
    "portion",
    "first_token_event",
)
RULE_CONDITIONS = ("span_name", "span_name_regex", "attributes", "span_kind", "service")
# A no-stage rule is only conditions: it gives no part of a span to any stage.
NO_STAGE_RULE_KEYS = RULE_CONDITIONS
SPAN_KINDS = tuple(kind for kind in SpanKind.values if kind)
DEFAULT_FIRST_TOKEN_EVENT = "first_token"  # noqa: S105 (an event name, not a secret)
MAX_THRESHOLD_MS = 3_600_000


@dataclass(frozen=True)
class RuleSpec:
    line: int
    span_name: str = ""
    name_match: str = NameMatch.GLOB
    attributes: dict[str, Any] = field(default_factory=dict)
    span_kind: str = ""
    service: str = ""
    portion: str = Portion.WHOLE
    first_token_event: str = DEFAULT_FIRST_TOKEN_EVENT

    def conditions(self) -> dict[str, Any]:
        """The fields of a no-stage rule."""
        return {
            "span_name": self.span_name,
            "name_match": self.name_match,
            "attributes": dict(self.attributes),
            "span_kind": self.span_kind,
            "service": self.service,
        }

    def fields(self) -> dict[str, Any]:
        """The fields of a stage's span rule."""
        return {
            **self.conditions(),
            "portion": self.portion,
            "first_token_event": self.first_token_event,
        }


@dataclass(frozen=True)
class StageSpec:
    line: int
    slug: str
    name: str
    budget_percentile: str | None
    budget_ms: int | None
    rules: list[RuleSpec]
    slug_line: int = 0
    degrade: dict[str, Any] = field(default_factory=dict)
    stream_budget: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PipelineSpec:
    line: int
    slug: str
    name: str
    description: str
    match_service: str
    match_root_span: str
    match_attributes: dict[str, Any]
    budget: dict[str, int]
    objective_target: Decimal | None
    objective_threshold_ms: int | None
    stages: list[StageSpec]
    slug_line: int = 0
    no_stage: list[RuleSpec] = field(default_factory=list)
    # Every evaluation setting by model field, defaults filled in for keys the file leaves out.
    evaluation: dict[str, int] = field(
        default_factory=lambda: {s.field: s.default for s in EVALUATION_SETTINGS}
    )


@dataclass(frozen=True)
class PipelinesSpec:
    line: int
    pipelines: list[PipelineSpec]


def _slug(reader: Reader, item: Item | None) -> str:
    if item is None:
        return ""
    return reader.text(item, max_length=50, check=slug_validator) or ""


def _name(reader: Reader, item: Item | None) -> str:
    if item is None:
        return ""
    return reader.text(item, max_length=100) or ""


def _optional_text(
    reader: Reader,
    item: Item | None,
    *,
    max_length: int | None,
    check: Callable[[str], None] | None = None,
) -> str:
    if item is None:
        return ""
    return reader.text(item, max_length=max_length, allow_empty=True, check=check) or ""


def _attributes(reader: Reader, item: Item | None) -> dict[str, Any]:
    if item is None:
        return {}
    attributes: dict[str, Any] = {}
    for key, entry in reader.entries(item).items():
        if not isinstance(entry.value, Scalar):
            reader.scalar(entry)
            continue
        value = entry.value.value
        line = entry.key_line if not key.strip() else entry.value.line
        checked = reader.validated(line, partial(validate_attributes, {key: value}))
        if checked is not None:
            attributes[key] = value
    return attributes


def _budget(reader: Reader, item: Item, *, single: bool) -> dict[str, int]:
    node = item.value
    if not isinstance(node, Mapping) or not node.items:
        reader.validated(node.line, lambda: validate_budget_mapping(None))
        return {}
    budget: dict[str, int] = {}
    for key, entry in node.items.items():
        if key not in PERCENTILES:
            reader.error(
                entry.key_line,
                f"Unknown percentile “{key}”; use one of {', '.join(PERCENTILES)}."
                f"{suggest(key, PERCENTILES)}",
            )
            continue
        value = reader.scalar(entry)
        if isinstance(value, float) and not math.isfinite(value):
            reader.error(entry.value.line, f"Budget {key} must be a whole number of milliseconds.")
            continue
        checked = reader.validated(entry.value.line, partial(validate_budget_mapping, {key: value}))
        budget.update(checked or {})
    if single and len(node.items) > 1:
        many = dict.fromkeys(node.items, 1)
        reader.validated(node.line, lambda: validate_budget_mapping(many, single=True))
    return budget


# What a reader of _checked_per_key returns for a value already reported as unreadable.
_UNREADABLE = object()


def _checked_per_key(
    reader: Reader,
    item: Item | None,
    what: str,
    keys: Iterable[str],
    read: Callable[[Item], Any],
    clean: Callable[[dict[str, Any]], dict[str, Any]],
) -> dict[str, Any]:
    """A mapping whose keys one validator (``clean``) checks: each key's value is read by
    ``read`` and checked alone, so a wrong one is named at its own line and left out."""
    if item is None:
        return {}
    entries = reader.mapping(item.value, what=what, keys=keys)
    if entries is None:
        return {}
    raw: dict[str, Any] = {}
    for key, entry in entries.items():
        value = read(entry)
        if value is _UNREADABLE:
            continue
        raw[key] = value
        if reader.validated(entry.value.line, partial(clean, {key: value})) is None:
            raw.pop(key)
    return clean(raw)


def _degrade(reader: Reader, item: Item | None) -> dict[str, Any]:
    """A stage's ``degrade:`` policy, each key checked at its own line by the policy's
    one validator."""

    def read(entry: Item) -> Any:
        if entry.key == "levers":
            levers = reader.sequence(entry, what="levers")
            return [reader.scalar(Item("levers", lever.line, lever)) for lever in levers]
        return reader.scalar(entry)

    return _checked_per_key(
        reader, item, "degrade policy", DEGRADE_KEYS, read, degrade_policy_clean
    )


def _number(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.isfinite(value)


def _whole_number(value: Any) -> bool:
    return _number(value) and value == int(value)


def _objective(reader: Reader, item: Item | None) -> tuple[Decimal | None, int | None]:
    if item is None:
        return None, None
    entries = reader.mapping(item.value, what="objective", keys=OBJECTIVE_KEYS)
    if entries is None:
        return None, None
    if len(entries) < len(OBJECTIVE_KEYS):
        missing = " and ".join(f"“{k}”" for k in OBJECTIVE_KEYS if k not in entries)
        reader.error(
            item.value.line,
            f"An objective needs both a target and a threshold: {missing} is missing"
            " (e.g. {target: 99.0, threshold_ms: 4000}).",
        )
        return None, None
    return _target(reader, entries["target"]), _threshold(reader, entries["threshold_ms"])


def _target(reader: Reader, item: Item) -> Decimal | None:
    value = reader.scalar(item)
    line = item.value.line
    if not _number(value):
        reader.error(line, "The objective target must be a percentage such as 99.5.")
        return None
    target = Decimal(str(value))
    if not Decimal(1) <= target <= Decimal("99.999"):
        reader.error(line, f"The objective target must be between 1 and 99.999, not {value}.")
        return None
    if target != target.quantize(Decimal("0.001")):
        reader.error(line, "The objective target has at most three decimals.")
        return None
    return target


def _threshold(reader: Reader, item: Item) -> int | None:
    value = reader.scalar(item)
    if not _whole_number(value):
        reader.error(
            item.value.line, "The objective threshold_ms must be a whole number of milliseconds."
        )
        return None
    if not 1 <= value <= MAX_THRESHOLD_MS:
        reader.error(
            item.value.line,
            f"The objective threshold_ms must be between 1 and {MAX_THRESHOLD_MS}, not {value}.",
        )
        return None
    return int(value)


def _evaluation(reader: Reader, item: Item | None) -> dict[str, int]:
    values = {setting.field: setting.default for setting in EVALUATION_SETTINGS}
    if item is None:
        return values
    entries = reader.mapping(item.value, what="evaluation", keys=EVALUATION_KEYS) or {}
    for setting in EVALUATION_SETTINGS:
        entry = entries.get(setting.key)
        if entry is None:
            continue
        if not isinstance(entry.value, Scalar):
            reader.scalar(entry)
            continue
        checked = reader.validated(
            entry.value.line, partial(validate_evaluation_value, setting, entry.value.value)
        )
        if checked is not None:
            values[setting.field] = checked
    return values


def _rule(
    reader: Reader, node: Node, *, what: str = "rule", keys: tuple[str, ...] = RULE_KEYS
) -> RuleSpec:
    entries = reader.mapping(node, what=what, keys=keys)
    if entries is None:
        return RuleSpec(line=node.line)
    fields: dict[str, Any] = {}
    if "span_name" in entries and "span_name_regex" in entries:
        reader.error(
            entries["span_name_regex"].key_line,
            "Use span_name (a glob) or span_name_regex, not both in one rule.",
        )
    elif "span_name" in entries:
        fields["span_name"] = (
            reader.text(entries["span_name"], max_length=500, check=validate_glob) or ""
        )
    elif "span_name_regex" in entries:
        pattern = reader.text(entries["span_name_regex"], max_length=500, check=validate_regex)
        fields.update(span_name=pattern or "", name_match=NameMatch.REGEX)
    fields["attributes"] = _attributes(reader, entries.get("attributes"))
    if "span_kind" in entries:
        fields["span_kind"] = reader.choice(entries["span_kind"], SPAN_KINDS) or ""
    if "service" in entries:
        fields["service"] = reader.text(entries["service"], max_length=200) or ""
    if "portion" in entries:
        fields["portion"] = reader.choice(entries["portion"], Portion.values) or Portion.WHOLE
    if "first_token_event" in entries:
        fields["first_token_event"] = (
            reader.text(entries["first_token_event"], max_length=100) or DEFAULT_FIRST_TOKEN_EVENT
        )
    conditions = [key for key in RULE_CONDITIONS if key in entries]
    if conditions == ["attributes"] and not fields["attributes"]:
        conditions = []
    if not conditions:
        reader.error(
            node.line,
            f"A {what} needs at least one condition: "
            f"{', '.join(RULE_CONDITIONS[:-1])} or {RULE_CONDITIONS[-1]}.",
        )
    return RuleSpec(line=node.line, **fields)


def _stream_budget(reader: Reader, item: Item | None) -> dict[str, Any]:
    """A stage's ``stream_budget:``, each budget checked at its own line by the budgets'
    one validator."""

    def read(entry: Item) -> Any:
        values = reader.mapping(entry.value, what=entry.key, keys=STREAM_PERCENTILES)
        if values is None:
            return _UNREADABLE
        return {name: reader.scalar(value) for name, value in values.items()}

    return _checked_per_key(reader, item, "stream budget", STREAM_KEYS, read, stream_budget_clean)


def _stage(reader: Reader, node: Node) -> StageSpec:
    entries = reader.mapping(node, what="stage", keys=STAGE_KEYS, required=("slug", "name"))
    if entries is None:
        return StageSpec(node.line, "", "", None, None, [])
    percentile, budget_ms = None, None
    if "budget" in entries:
        budget = _budget(reader, entries["budget"], single=True)
        if len(budget) == 1:
            ((percentile, budget_ms),) = budget.items()
    rules = [_rule(reader, rule) for rule in _list(reader, entries.get("match"), "rules")]
    degrade = _degrade(reader, entries.get("degrade"))
    stream_budget = _stream_budget(reader, entries.get("stream_budget"))
    return StageSpec(
        line=node.line,
        slug=_slug(reader, entries.get("slug")),
        name=_name(reader, entries.get("name")),
        budget_percentile=percentile,
        budget_ms=budget_ms,
        rules=rules,
        slug_line=_line_of(entries.get("slug"), node),
        degrade=degrade,
        stream_budget=stream_budget,
    )


def _list(reader: Reader, item: Item | None, what: str) -> list[Node]:
    return [] if item is None else reader.sequence(item, what=what)


def _pipeline(reader: Reader, node: Node) -> PipelineSpec:
    entries = reader.mapping(
        node, what="pipeline", keys=PIPELINE_KEYS, required=("slug", "name", "budget")
    )
    if entries is None:
        entries = {}
    match: dict[str, Item] = {}
    if "match" in entries:
        match = reader.mapping(entries["match"].value, what="match", keys=PIPELINE_MATCH_KEYS) or {}
    target, threshold = _objective(reader, entries.get("objective"))
    evaluation = _evaluation(reader, entries.get("evaluation"))
    stages = [_stage(reader, stage) for stage in _list(reader, entries.get("stages"), "stages")]
    _check_unique(reader, [(s.slug, s.slug_line) for s in stages], "stage", " in this pipeline")
    no_stage = [
        _rule(reader, rule, what="no-stage rule", keys=NO_STAGE_RULE_KEYS)
        for rule in _list(reader, entries.get("no_stage"), "no-stage rules")
    ]
    _check_rule_cap(reader, node, stages, no_stage)
    return PipelineSpec(
        line=node.line,
        slug=_slug(reader, entries.get("slug")),
        name=_name(reader, entries.get("name")),
        description=_optional_text(reader, entries.get("description"), max_length=None),
        match_service=_optional_text(reader, match.get("service"), max_length=200),
        match_root_span=_optional_text(
            reader, match.get("root_span"), max_length=200, check=validate_glob
        ),
        match_attributes=_attributes(reader, match.get("attributes")),
        budget=_budget(reader, entries["budget"], single=False) if "budget" in entries else {},
        objective_target=target,
        objective_threshold_ms=threshold,
        stages=stages,
        slug_line=_line_of(entries.get("slug"), node),
        no_stage=no_stage,
        evaluation=evaluation,
    )


def _check_rule_cap(
    reader: Reader, node: Node, stages: list[StageSpec], no_stage: list[RuleSpec]
) -> None:
    """The services refuse a rule past ``PIPELINE_MAX_RULES``; a file saying more than that
    is told so before anything is applied."""
    cap = settings.PIPELINE_MAX_RULES
    count = sum(len(stage.rules) for stage in stages) + len(no_stage)
    if cap and count > cap:
        reader.error(
            node.line,
            f"This pipeline has {count} span rules (its stages' and its no-stage rules "
            f"together), more than a pipeline may have (PIPELINE_MAX_RULES={cap}).",
        )


def _line_of(item: Item | None, node: Node) -> int:
    return item.value.line if item is not None else node.line


def _check_unique(reader: Reader, slugs: list[tuple[str, int]], what: str, where: str = "") -> None:
    seen: dict[str, int] = {}
    for slug, line in slugs:
        if not slug:
            continue
        if slug in seen:
            reader.error(
                line, f"Duplicate {what} slug “{slug}”{where} (first at line {seen[slug]})."
            )
        else:
            seen.setdefault(slug, line)


def parse_pipelines(item: Item, reader: Reader) -> PipelinesSpec:
    pipelines = [_pipeline(reader, node) for node in reader.sequence(item, what="pipelines")]
    _check_unique(reader, [(p.slug, p.slug_line) for p in pipelines], "pipeline")
    return PipelinesSpec(line=item.key_line, pipelines=pipelines)
