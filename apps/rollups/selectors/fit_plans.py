"""The fit check's "Apply" choices, each with what it would leave over budget.

A plan sets some stage budgets, and perhaps the end-to-end budget, at once. Judged by
the same observed percentiles the suggestions come from, a stage is over budget when
its observed percentile exceeds the budget it would have, and so is the end to end;
the page says so before anything is applied, telling apart what is over today.
"""

from collections.abc import Mapping
from dataclasses import dataclass

from apps.pipelines.models import Stage
from apps.rollups.selectors.fit_suggestions import Suggestions

FIT = "fit"  # the stage budgets, fitted into an end-to-end budget that can be met
TRACES = "traces"  # stage budgets as the traces show them, an end-to-end budget to match
KEEP = "keep"  # the end-to-end budget kept, the stages given what it leaves them


@dataclass(frozen=True)
class OverBudget:
    """A stage (or, ``stage`` None, the end to end) over budget at its percentile."""

    stage: Stage | None
    percentile: str
    observed_ms: float
    budget_ms: int
    already: bool  # over its budget as it is today

    @property
    def name(self) -> str:
        return self.stage.name if self.stage else "End to end"


@dataclass(frozen=True)
class FitPlan:
    kind: str
    changes: list[tuple[Stage, int]]  # the stage budgets that change, in stage order
    e2e_ms: int | None  # the end-to-end budget at the headline percentile, if it changes
    over: list[OverBudget]

    @property
    def stage_ms(self) -> dict[int, int]:
        return {stage.pk: ms for stage, ms in self.changes}

    @property
    def newly_over(self) -> list[OverBudget]:
        return [item for item in self.over if not item.already]

    @property
    def still_over(self) -> list[OverBudget]:
        return [item for item in self.over if item.already]


@dataclass(frozen=True)
class _Observed:
    """What the plans are judged by: the period's percentiles and today's budgets."""

    stages: list[Stage]
    observed_ms: Mapping[int, float]
    headline: tuple[str, int] | None
    e2e_observed_ms: float | None


def _plan(kind: str, budgets: Mapping[int, int], e2e_ms: int | None, seen: _Observed) -> FitPlan:
    changes = [
        (s, budgets[s.pk]) for s in seen.stages if budgets.get(s.pk, s.budget_ms) != s.budget_ms
    ]
    changed = {stage.pk: ms for stage, ms in changes}
    over = []
    for stage in seen.stages:
        observed = seen.observed_ms.get(stage.pk)
        after = changed.get(stage.pk, stage.budget_ms)
        if observed is None or after is None or observed <= after:
            continue
        already = stage.budget_ms is not None and observed > stage.budget_ms
        over.append(OverBudget(stage, stage.budget_percentile, observed, after, already))
    if seen.headline is not None and seen.e2e_observed_ms is not None:
        percentile, current = seen.headline
        e2e_after = e2e_ms if e2e_ms is not None else current
        observed_e2e = seen.e2e_observed_ms
        if observed_e2e > e2e_after:
            over.append(
                OverBudget(None, percentile, observed_e2e, e2e_after, observed_e2e > current)
            )
    new_e2e = e2e_ms if seen.headline is not None and e2e_ms != seen.headline[1] else None
    return FitPlan(kind, changes, new_e2e, over)


def fit_plans(
    *,
    suggestions: Suggestions,
    stages: list[Stage],
    observed_ms: Mapping[int, float],
    headline: tuple[str, int] | None,
    e2e_observed_ms: float | None,
) -> list[FitPlan]:
    """The plans worth offering: those that change something."""
    seen = _Observed(stages, observed_ms, headline, e2e_observed_ms)
    if suggestions.met is False:
        plans = [_plan(TRACES, suggestions.stage_ms, suggestions.e2e_ms, seen)]
        if suggestions.target_ms:
            plans.append(_plan(KEEP, suggestions.target_ms, None, seen))
    else:
        plans = [_plan(FIT, suggestions.stage_ms, None, seen)]
    return [plan for plan in plans if plan.changes or plan.e2e_ms is not None]
