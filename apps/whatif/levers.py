"""The lever finder: which change to a pipeline would move its end-to-end percentile most.

Three kinds of lever, each measured by replaying the same traces with the change:

- **Sensitivity**: each stage 10 % faster, and 100 ms faster (each of its spans). A
  stage whose milliseconds rarely sit on the slow requests' critical path saves
  little, however large its own percentile.
- **Run concurrently**: two stages (or two calls of one stage) that ran one after
  the other in most traces where both ran, as independent siblings could. The
  replay drops only the ordering between them; whether the second needs the
  first's output is not in the timing, so it is the user's call.
- **Cache**: a stage whose times fall into two groups far apart (a cache at work, or
  a fast path) is a candidate for serving more requests the fast way; the saving is
  for a share of the remaining requests served at the fast group's median.

Levers are found on top of the scenario being tried: each saving is measured from the
scenario's own percentile, and no lever touches a stage the scenario removed (there is
nothing left of it to change), pairs it already runs concurrently, or a stage it caches.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from apps.core.figures import format_ms
from apps.core.percentiles import QUANTILES
from apps.core.time import NS_PER_MS
from apps.whatif.changes import CACHE, PARALLEL, REMOVE, SCALE, SHIFT, Change
from apps.whatif.dependency import NO_STAGE, UNLESS_PARALLEL
from apps.whatif.outcome import Floats, nearest_rank
from apps.whatif.replay import ReplayModel, replay
from apps.whatif.scenario import Scenario, scenario_compile

SCALE_FACTOR = 0.9
SHIFT_MS = -100.0
# Two stages count as running one after the other when one directly followed the
# other in at least this share of the traces holding both.
SEQUENTIAL_SHARE = 0.9
# Calls of one stage count when one followed another in at least this share of traces.
REPEATED_SHARE = 0.2
# Two groups of times: each holds this share at least, and their means (of the
# logarithms) lie this many pooled standard deviations apart (Ashman's D). The best
# split of one bell curve gives about 2.7; 4 asks for two clearly separate humps.
BIMODAL_MIN_SHARE = 0.05
BIMODAL_SEPARATION = 4.0
DEFAULT_HIT_RATIO = 0.5


@dataclass(frozen=True)
class Lever:
    kind: str  # "faster", "concurrent", "cache"
    title: str
    detail: str
    saving_ms: float  # at the percentile; negative: it would be slower
    changes: tuple[Change, ...]
    stage: str

    def as_data(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "stage": self.stage,
            "title": self.title,
            "detail": self.detail,
            "saving_ms": self.saving_ms,
            "changes": [change.as_data() for change in self.changes],
        }


@dataclass(frozen=True)
class LeverStage:
    slug: str
    name: str


class _Measure:
    """Replays under the scenario plus a lever's changes, returning the end-to-end
    percentile's saving in ms against the scenario alone."""

    def __init__(
        self,
        model: ReplayModel,
        quantile: float,
        scenario: Sequence[Change],
        budgets_ms: Mapping[str, int | None],
    ) -> None:
        self.model = model
        self.quantile = quantile
        self.scenario = tuple(scenario)
        self.budgets_ms = budgets_ms
        self.base = self.percentile(self._compiled(()))

    def _compiled(self, changes: Sequence[Change]) -> Scenario:
        return scenario_compile(
            [*self.scenario, *changes],
            stage_slugs=self.model.stage_slugs,
            budgets_ms=self.budgets_ms,
        )

    def percentile(self, scenario: Scenario) -> float:
        value = nearest_rank(replay(self.model, scenario, figures=False).e2e_ns, self.quantile)
        return 0.0 if value is None else value

    def saving(self, changes: Sequence[Change]) -> float:
        return round((self.base - self.percentile(self._compiled(changes))) / NS_PER_MS, 1)


@dataclass(frozen=True)
class _Taken:
    """What the scenario already does, which no lever may suggest again."""

    removed: frozenset[str]
    cached: frozenset[str]
    concurrent: frozenset[frozenset[str]]

    @classmethod
    def of(cls, scenario: Sequence[Change]) -> "_Taken":
        return cls(
            removed=frozenset(c.stage for c in scenario if c.op == REMOVE),
            cached=frozenset(c.stage for c in scenario if c.op == CACHE),
            concurrent=frozenset(
                frozenset((c.stage, c.with_stage or "")) for c in scenario if c.op == PARALLEL
            ),
        )


def levers_find(
    model: ReplayModel,
    *,
    stages: Sequence[LeverStage],
    percentile: str = "p95",
    hit_ratio: float = DEFAULT_HIT_RATIO,
    scenario: Sequence[Change] = (),
    budgets_ms: Mapping[str, int | None] | None = None,
) -> dict[str, Any]:
    """Every lever with its saving at ``percentile`` on top of ``scenario`` (the changes
    being tried; a cap at the budget reads ``budgets_ms``); each list sorted by saving."""
    measure = _Measure(model, QUANTILES[percentile], scenario, budgets_ms or {})
    taken = _Taken.of(scenario)
    present = model.observed_present.copy()
    for index, stage in enumerate(stages):
        if stage.slug in taken.removed:
            present[:, index] = False  # gone from every trace: nothing to speed up
    sensitivity: list[dict[str, Any]] = []
    for index, stage in enumerate(stages):
        if not present[:, index].any():
            continue
        scaled = measure.saving([Change(stage.slug, SCALE, factor=SCALE_FACTOR)])
        shifted = measure.saving([Change(stage.slug, SHIFT, ms=SHIFT_MS)])
        sensitivity.append(
            {
                "stage": stage.slug,
                "name": stage.name,
                "traces": int(present[:, index].sum()),
                "saving_10pct_ms": scaled,
                "saving_100ms_ms": shifted,
                "changes_10pct": [Change(stage.slug, SCALE, factor=SCALE_FACTOR).as_data()],
                "changes_100ms": [Change(stage.slug, SHIFT, ms=SHIFT_MS).as_data()],
            }
        )
    sensitivity.sort(key=lambda row: (-row["saving_100ms_ms"], row["stage"]))
    levers = [
        *_concurrent_levers(model, stages, present, measure, taken),
        *_cache_levers(model, stages, present, measure, hit_ratio, taken),
    ]
    levers.sort(key=lambda lever: (-lever.saving_ms, lever.kind, lever.stage))
    return {
        "percentile": percentile,
        "base_ms": round(measure.base / NS_PER_MS, 1),
        "sensitivity": sensitivity,
        "levers": [lever.as_data() for lever in levers],
    }


def _adjacent_pairs(model: ReplayModel) -> dict[tuple[int, int], int]:
    """(stage, stage) pairs, smaller first, with the number of traces in which a span
    of one started right after a span of the other ended, as siblings."""
    edges = model.edge_toggle == UNLESS_PARALLEL
    a, b = model.edge_pair_a[edges], model.edge_pair_b[edges]
    valid = (a != NO_STAGE) & (b != NO_STAGE)
    low, high = np.minimum(a[valid], b[valid]), np.maximum(a[valid], b[valid])
    traces = model.edge_trace[edges][valid]
    stages = model.stage_count
    keys = np.unique((low * stages + high) * model.trace_count + traces)
    pair_keys, counts = np.unique(keys // model.trace_count, return_counts=True)
    return {
        (int(key // stages), int(key % stages)): int(count)
        for key, count in zip(pair_keys, counts, strict=True)
    }


def _concurrent_levers(
    model: ReplayModel,
    stages: Sequence[LeverStage],
    present: np.ndarray,
    measure: _Measure,
    taken: _Taken,
) -> list[Lever]:
    levers = []
    for (first, second), count in _adjacent_pairs(model).items():
        both = int((present[:, first] & present[:, second]).sum())
        if not both:
            continue
        share = count / both
        one, other = stages[first], stages[second]
        if first != second and frozenset((one.slug, other.slug)) in taken.concurrent:
            continue
        if first == second:
            if share < REPEATED_SHARE:
                continue
            title = f"Run the {one.name} calls concurrently"
            detail = f"In {share:.0%} of traces with {one.name}, one call waited for another."
        else:
            if share < SEQUENTIAL_SHARE:
                continue
            title = f"Run {one.name} and {other.name} concurrently"
            detail = (
                f"One ran right after the other in {share:.0%} of the {both} traces with both; "
                "this holds only if neither needs the other's result."
            )
        changes = (Change(one.slug, PARALLEL, with_stage=other.slug),)
        levers.append(
            Lever("concurrent", title, detail, measure.saving(changes), changes, one.slug)
        )
    return levers


def bimodal_split(values: Floats) -> tuple[float, float, float] | None:
    """(share of the fast group, its median, the slow group's median) when the values'
    logarithms fall into two groups far apart; None otherwise.

    The split is the one of the sorted values that leaves the least squared spread
    within the two groups (1-D k-means with k = 2, found exactly in one pass).
    """
    positive = np.sort(values[values > 0])
    n = len(positive)
    if n < 20:
        return None
    logs = np.log(positive)
    prefix = np.cumsum(logs)
    squares = np.cumsum(logs * logs)
    left = np.arange(1, n)
    right = n - left
    mean_left = prefix[:-1] / left
    mean_right = (prefix[-1] - prefix[:-1]) / right
    spread = (squares[:-1] - left * mean_left**2) + (
        (squares[-1] - squares[:-1]) - right * mean_right**2
    )
    smallest = max(int(np.ceil(BIMODAL_MIN_SHARE * n)), 2)
    allowed = (left >= smallest) & (right >= smallest)
    if not allowed.any():
        return None
    cut = int(np.argmin(np.where(allowed, spread, np.inf)))
    fast, slow = logs[: cut + 1], logs[cut + 1 :]
    pooled = np.sqrt((fast.var() + slow.var()) / 2)
    separation = (slow.mean() - fast.mean()) / pooled if pooled > 0 else np.inf
    if separation < BIMODAL_SEPARATION:
        return None
    return (
        len(fast) / n,
        float(np.median(positive[: cut + 1])),
        float(np.median(positive[cut + 1 :])),
    )


def _cache_levers(
    model: ReplayModel,
    stages: Sequence[LeverStage],
    present: np.ndarray,
    measure: _Measure,
    hit_ratio: float,
    taken: _Taken,
) -> list[Lever]:
    levers = []
    for index, stage in enumerate(stages):
        if stage.slug in taken.cached:
            continue
        walls = model.observed_wall_ns[present[:, index], index]
        split = bimodal_split(walls)
        if split is None:
            continue
        fast_share, fast_ns, slow_ns = split
        hit_ms = max(round(fast_ns / NS_PER_MS, 1), 0.1)
        changes = (Change(stage.slug, CACHE, hit_ratio=hit_ratio, hit_ms=hit_ms),)
        title = f"Serve more of {stage.name} the fast way"
        detail = (
            f"{fast_share:.0%} of its requests take about {format_ms(hit_ms)}, the rest about "
            f"{format_ms(slow_ns / NS_PER_MS)} (a cache at work, or one missing). The saving "
            f"is for {hit_ratio:.0%} of the slow ones served in {format_ms(hit_ms)} too."
        )
        levers.append(Lever("cache", title, detail, measure.saving(changes), changes, stage.slug))
    return levers
