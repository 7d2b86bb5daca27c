"""A pipeline's budgets and observed times, as the runtime document gives them.

The document's format is the protocol in the server's ``docs/runtime.md``; this module
reads version 1 and refuses anything else, so a client never acts on figures it
misreads.
"""

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from latency_budgets.policies import NO_POLICY, PolicyError, StagePolicy, stage_policy

DOCUMENT_VERSION = 1
PERCENTILES = ("p50", "p90", "p95", "p99")
# The deadline comes from the tail budget: a deadline at the median would degrade half
# the requests.
DEADLINE_PERCENTILES = ("p99", "p95", "p90", "p50")
DEFAULT_REFRESH_S = 30.0
# Below this many holdout requests a stage's uncut figures are too thin to beat the
# observed ones, cut as those are.
MIN_UNCUT_COUNT = 30


class DocumentError(ValueError):
    """A runtime document or configuration file this client cannot use."""


@dataclass(frozen=True, slots=True)
class Observed:
    """A distribution over the server's recent window; None where it has no figure."""

    count: int = 0
    p50: float | None = None
    p95: float | None = None
    p99: float | None = None

    def get(self, percentile: str) -> float | None:
        value: float | None = getattr(self, percentile, None)
        return value


@dataclass(frozen=True, slots=True)
class StageFigures:
    slug: str
    position: int
    budget_percentile: str | None = None
    budget_ms: float | None = None
    observed: Observed = Observed()
    policy: StagePolicy = NO_POLICY
    uncut: Observed = Observed()

    @property
    def unlevered(self) -> Observed:
        """The stage's times as if no lever cut them: the holdout's when there are enough
        holdout requests, else the observed ones."""
        return self.uncut if self.uncut.count >= MIN_UNCUT_COUNT else self.observed

    def tail(self, percentile: str) -> float | None:
        return self.unlevered.get(percentile)


@dataclass(frozen=True, slots=True)
class PipelineFigures:
    slug: str
    deadline_ms: float | None
    stages: tuple[StageFigures, ...] = ()
    observed: Observed = Observed()
    refresh_s: float = DEFAULT_REFRESH_S
    holdout_percent: float = 0.0
    by_slug: Mapping[str, StageFigures] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_slug", {stage.slug: stage for stage in self.stages})

    def stage(self, slug: str) -> StageFigures | None:
        return self.by_slug.get(slug)


def _number(value: Any, where: str, *, minimum: float = 0.0) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise DocumentError(f"{where}: expected a number or null, got {value!r}.")
    try:
        number = float(value)
    except OverflowError:  # a JSON integer past any float
        raise DocumentError(f"{where}: out of range.") from None
    if not math.isfinite(number) or number < minimum:
        raise DocumentError(f"{where}: {value!r} is out of range.")
    return number


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise DocumentError(f"{where}: expected an object.")
    return value


def _observed(value: Any, where: str) -> Observed:
    data = _mapping(value, where)
    count = data.get("count", 0)
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise DocumentError(f"{where}.count: expected a whole number.")
    return Observed(
        count=count,
        p50=_number(data.get("p50"), f"{where}.p50"),
        p95=_number(data.get("p95"), f"{where}.p95"),
        p99=_number(data.get("p99"), f"{where}.p99"),
    )


def _policy(degrade: Any, advice: Any, where: str) -> StagePolicy:
    try:
        return stage_policy(degrade, advice, where)
    except PolicyError as exc:
        raise DocumentError(str(exc)) from None


def _slug(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise DocumentError(f"{where}: expected a slug.")
    return value


def figures_from_document(document: Any) -> PipelineFigures:
    """Figures from a parsed runtime document (``GET /v1/budgets/{pipeline}``)."""
    data = _mapping(document, "document")
    version = data.get("version")
    if isinstance(version, bool) or version != DOCUMENT_VERSION:
        raise DocumentError(f"document: version {data.get('version')!r} is not {DOCUMENT_VERSION}.")
    stages = data.get("stages") or []
    if not isinstance(stages, list):
        raise DocumentError("document.stages: expected a list.")
    parsed = []
    for index, stage in enumerate(stages):
        where = f"document.stages[{index}]"
        item = _mapping(stage, where)
        budget = _mapping(item.get("budget"), f"{where}.budget")
        percentile = budget.get("percentile")
        if percentile is not None and percentile not in PERCENTILES:
            raise DocumentError(f"{where}.budget.percentile: {percentile!r} is not a percentile.")
        position = item.get("position", index)
        if isinstance(position, bool) or not isinstance(position, int):
            raise DocumentError(f"{where}.position: expected a whole number.")
        parsed.append(
            StageFigures(
                slug=_slug(item.get("stage"), f"{where}.stage"),
                position=position,
                budget_percentile=percentile,
                budget_ms=_number(budget.get("ms"), f"{where}.budget.ms"),
                observed=_observed(item.get("observed"), f"{where}.observed"),
                policy=_policy(item.get("degrade"), item.get("advice"), where),
                uncut=_observed(item.get("uncut"), f"{where}.uncut"),
            )
        )
    refresh = _number(data.get("refresh_s"), "document.refresh_s", minimum=1.0)
    holdout = _number(data.get("holdout_percent"), "document.holdout_percent")
    if holdout is not None and holdout > 100:
        raise DocumentError("document.holdout_percent: a share from 0 to 100.")
    return PipelineFigures(
        slug=_slug(data.get("pipeline"), "document.pipeline"),
        deadline_ms=_number(data.get("deadline_ms"), "document.deadline_ms", minimum=1.0),
        stages=tuple(sorted(parsed, key=lambda stage: stage.position)),
        observed=_observed(data.get("observed"), "document.observed"),
        refresh_s=DEFAULT_REFRESH_S if refresh is None else refresh,
        holdout_percent=0.0 if holdout is None else holdout,
    )


def deadline_from_budgets(budget: Mapping[str, Any], objective: Mapping[str, Any]) -> float | None:
    """The objective's threshold, else the budget at the highest budgeted percentile."""
    threshold = objective.get("threshold_ms")
    if threshold is not None:
        return _number(threshold, "objective.threshold_ms", minimum=1.0)
    for percentile in DEADLINE_PERCENTILES:
        if budget.get(percentile) is not None:
            return _number(budget[percentile], f"budget.{percentile}", minimum=1.0)
    return None


def figures_from_configuration(pipeline: Any) -> PipelineFigures:
    """Figures from one pipeline of the team's configuration file (no observed times)."""
    data = _mapping(pipeline, "pipeline")
    slug = _slug(data.get("slug"), "pipeline.slug")
    where = f"pipeline {slug}"
    stages = data.get("stages") or []
    if not isinstance(stages, list):
        raise DocumentError(f"{where}: stages must be a list.")
    parsed = []
    for index, stage in enumerate(stages):
        item = _mapping(stage, f"{where}, stage {index + 1}")
        budget = _mapping(item.get("budget"), f"{where}, stage {index + 1}, budget")
        chosen = [(p, budget[p]) for p in PERCENTILES if p in budget]
        if len(chosen) > 1:
            raise DocumentError(f"{where}, stage {index + 1}: a budget names one percentile.")
        percentile, ms = chosen[0] if chosen else (None, None)
        parsed.append(
            StageFigures(
                slug=_slug(item.get("slug"), f"{where}, stage {index + 1}, slug"),
                position=index,
                budget_percentile=percentile,
                budget_ms=_number(ms, f"{where}, stage {index + 1}, budget"),
                # The file's ``degrade:`` has the server's keys; no advice offline.
                policy=_policy(item.get("degrade"), None, f"{where}, stage {index + 1}"),
            )
        )
    return PipelineFigures(
        slug=slug,
        deadline_ms=deadline_from_budgets(
            _mapping(data.get("budget"), f"{where}, budget"),
            _mapping(data.get("objective"), f"{where}, objective"),
        ),
        stages=tuple(parsed),
    )
