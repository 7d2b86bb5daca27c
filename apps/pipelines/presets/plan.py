"""What a preset will create for a given end-to-end budget: stages, budgets, rules.

The creation form shows it before anything is written, and creation writes exactly
it, so the two cannot disagree.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from apps.core.percentiles import PERCENTILES
from apps.pipelines.budget_rounding import budget_round_down
from apps.pipelines.models import Percentile, Portion, SpanRule
from apps.pipelines.presets.catalog import PRESETS, Preset, PresetStage

NAME_GROUP = "span name"


@dataclass(frozen=True)
class RuleGroup:
    """Rules alike, said once: one attribute with its values, or span name globs."""

    label: str
    values: list[str]


@dataclass(frozen=True)
class PlannedStage:
    slug: str
    name: str
    share_percent: int
    percentile: str
    budget_ms: int | None  # None: no end-to-end budget yet, or a share below 1 ms
    rules: Sequence[Mapping[str, Any]]
    groups: list[RuleGroup]
    portion: str  # the portion all its rules take, or "" when they differ


@dataclass(frozen=True)
class PresetPlan:
    key: str
    preset: Preset
    percentile: str | None
    e2e_ms: int | None
    stages: list[PlannedStage]

    @property
    def allocated_ms(self) -> int:
        return sum(stage.budget_ms or 0 for stage in self.stages)

    @property
    def allocated_share(self) -> float | None:
        return self.allocated_ms / self.e2e_ms if self.e2e_ms else None

    @property
    def rule_count(self) -> int:
        return sum(len(stage.rules) for stage in self.stages)


def headline(budget: Mapping[str, int]) -> tuple[str, int] | None:
    """The highest percentile given, as ``Pipeline.headline_budget`` picks it."""
    given = [p for p in PERCENTILES if budget.get(p)]
    return (given[-1], budget[given[-1]]) if given else None


def stage_budget_ms(e2e_ms: int, share_percent: int) -> int | None:
    """The stage's share of the end-to-end budget, rounded down to a readable step.

    Rounding down keeps the stages' sum at or under ``e2e_ms`` x their shares; a share
    under 1 ms gets no budget rather than one that would break that.
    """
    ms = budget_round_down(Fraction(e2e_ms * share_percent, 100))
    return ms or None


def _groups(rules: Sequence[Mapping[str, Any]]) -> list[RuleGroup]:
    groups: dict[str, list[str]] = {}
    for rule in rules:
        others = {k: v for k, v in rule.items() if k not in ("attributes", "span_name", "portion")}
        attributes = rule.get("attributes", {})
        if not others and len(attributes) == 1 and not rule.get("span_name"):
            [(key, value)] = attributes.items()
            groups.setdefault(key, []).append(str(value))
        elif not others and not attributes and rule.get("span_name"):
            groups.setdefault(NAME_GROUP, []).append(rule["span_name"])
        else:
            fields = {k: v for k, v in rule.items() if k != "portion"}
            groups.setdefault(SpanRule(**fields).describe(), [])
    return [RuleGroup(label, values) for label, values in groups.items()]


def _portion(rules: Sequence[Mapping[str, Any]]) -> str:
    portions = {rule.get("portion", Portion.WHOLE) for rule in rules}
    return portions.pop() if len(portions) == 1 else ""


def _planned(stage: PresetStage, percentile: str, e2e_ms: int | None) -> PlannedStage:
    return PlannedStage(
        slug=stage.slug,
        name=stage.name,
        share_percent=stage.share_percent,
        percentile=percentile,
        budget_ms=stage_budget_ms(e2e_ms, stage.share_percent) if e2e_ms else None,
        rules=stage.rules,
        groups=_groups(stage.rules),
        portion=_portion(stage.rules),
    )


def preset_plan(*, key: str, budget: Mapping[str, int]) -> PresetPlan:
    """The stages ``PRESETS[key]`` creates under the end-to-end ``budget``.

    Stage budgets are set at the budget's headline percentile (the highest given, the
    one the allocation bar compares with), each its share of that budget.
    """
    preset = PRESETS[key]
    top = headline(budget)
    percentile, e2e_ms = top if top else (Percentile.P95.value, None)
    return PresetPlan(
        key=key,
        preset=preset,
        percentile=top[0] if top else None,
        e2e_ms=e2e_ms,
        stages=[_planned(stage, percentile, e2e_ms) for stage in preset.stages],
    )
