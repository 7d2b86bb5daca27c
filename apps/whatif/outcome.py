"""A replay's figures, shaped like the percentiles API: before and after, with intervals.

Percentiles are exact nearest-rank percentiles of the replayed traces (the rollups'
sketches are within 1 % of these). Each has a 95 % bootstrap interval: the traces are
drawn again with replacement ``BOOTSTRAP_ROUNDS`` times (the same draws for every
figure, from a fixed seed, so a result is reproducible), and the interval holds the
middle 95 % of the percentile over the draws.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from apps.core.percentiles import QUANTILES
from apps.core.time import NS_PER_MS
from apps.rollups.selectors.percentiles import budget_status
from apps.whatif.replay import ReplayResult

BOOTSTRAP_ROUNDS = 200
BOOTSTRAP_SEED = 20231030
Floats = npt.NDArray[np.float64]


def ms(value_ns: float | None) -> float | None:
    """Milliseconds to 0.1 ms, as the percentiles API shows them."""
    if value_ns is None or not np.isfinite(value_ns):
        return None
    return round(float(value_ns) / NS_PER_MS, 1)


def nearest_rank(values: Floats, quantile: float) -> float | None:
    """The smallest value with at least ``quantile`` of the values at or below it."""
    if not len(values):
        return None
    ordered = np.sort(values)
    rank = max(int(np.ceil(quantile * len(ordered))), 1)
    return float(ordered[rank - 1])


@dataclass(frozen=True)
class Resamples:
    """How often each trace is drawn, per bootstrap round: (rounds, traces)."""

    counts: npt.NDArray[np.int64]

    @classmethod
    def draw(cls, traces: int, rounds: int = BOOTSTRAP_ROUNDS) -> "Resamples":
        rng = np.random.default_rng(BOOTSTRAP_SEED)
        picks = rng.integers(0, traces, size=(rounds, traces)) if traces else np.zeros((rounds, 0))
        flat = (picks + np.arange(rounds)[:, None] * traces).ravel().astype(np.int64)
        counts = np.bincount(flat, minlength=rounds * traces).reshape(rounds, traces)
        return cls(counts)

    def intervals(
        self, values: Floats, present: npt.NDArray[np.bool_] | None = None
    ) -> dict[str, list[float | None]]:
        """The 95 % interval of each percentile of ``values`` (traces where ``present``)."""
        if present is None:
            present = np.ones(len(values), dtype=np.bool_)
        chosen = values[present]
        if not len(chosen):
            return {name: [None, None] for name in QUANTILES}
        order = np.argsort(chosen, kind="stable")
        ordered = chosen[order]
        counts = self.counts[:, present][:, order]
        cumulative = np.cumsum(counts, axis=1)
        drawn = cumulative[:, -1]
        result: dict[str, list[float | None]] = {}
        for name, quantile in QUANTILES.items():
            rank = np.maximum(np.ceil(quantile * drawn), 1)
            position = (cumulative < rank[:, None]).sum(axis=1)
            picked = ordered[np.minimum(position, len(ordered) - 1)][drawn > 0]
            if not len(picked):
                result[name] = [None, None]
                continue
            low, high = np.percentile(picked, [2.5, 97.5], method="nearest")
            result[name] = [ms(low), ms(high)]
        return result


def _percentiles(values: Floats) -> dict[str, float | None]:
    return {name: ms(nearest_rank(values, q)) for name, q in QUANTILES.items()}


@dataclass(frozen=True)
class StageInfo:
    slug: str
    name: str
    budget: dict[str, int]  # ms by percentile


@dataclass(frozen=True)
class PipelineInfo:
    budget: dict[str, int]
    objective_target: float | None  # percent of requests
    objective_threshold_ms: int | None


def side(
    result: ReplayResult,
    *,
    stages: Sequence[StageInfo],
    pipeline: PipelineInfo,
    errors: int,
    resamples: Resamples,
) -> dict[str, Any]:
    """One side (before or after) of a what-if, in the percentiles API's shape."""
    e2e = result.e2e_ns
    total = float(e2e.sum())
    e2e_percentiles = _percentiles(e2e)
    e2e_ms = e2e / NS_PER_MS
    within = {
        p: round(float((e2e_ms <= limit).mean()), 4) if len(e2e) else None
        for p, limit in pipeline.budget.items()
    }
    objective = None
    if pipeline.objective_target is not None and pipeline.objective_threshold_ms is not None:
        share = float((e2e_ms <= pipeline.objective_threshold_ms).mean()) if len(e2e) else None
        objective = {
            "target": pipeline.objective_target,
            "threshold_ms": pipeline.objective_threshold_ms,
            "share": None if share is None else round(share, 4),
            "met": None if share is None else share * 100 >= pipeline.objective_target,
        }
    stage_rows = []
    for index, stage in enumerate(stages):
        wall = result.wall_ns[:, index]
        present = ~np.isnan(wall)
        values = wall[present]
        critical = result.critical_ns[present, index]
        percentiles = _percentiles(values)
        stage_rows.append(
            {
                "slug": stage.slug,
                "name": stage.name,
                "count": int(present.sum()),
                **percentiles,
                "max": ms(values.max()) if len(values) else None,
                "budget": stage.budget or None,
                "status": budget_status(percentiles=percentiles, budget=stage.budget),
                "intervals": resamples.intervals(np.nan_to_num(wall), present),
                "critical_path": {
                    "share": round(float(critical.sum()) / total, 6) if total else None,
                    "mean_ms": ms(critical.mean()) if len(critical) else None,
                    "p95": ms(nearest_rank(critical, 0.95)),
                },
            }
        )
    untracked = result.critical_ns[:, -1]
    return {
        "e2e": {
            "count": len(e2e),
            "errors": errors,
            **e2e_percentiles,
            "max": ms(e2e.max()) if len(e2e) else None,
            "mean": ms(e2e.mean()) if len(e2e) else None,
            "budget": pipeline.budget or None,
            "status": budget_status(percentiles=e2e_percentiles, budget=pipeline.budget),
            "intervals": resamples.intervals(e2e),
            "within_budget": within,
            "objective": objective,
        },
        "stages": stage_rows,
        "untracked": {
            "critical_path": {
                "share": round(float(untracked.sum()) / total, 6) if total else None,
                "mean_ms": ms(untracked.mean()) if len(untracked) else None,
            }
        },
    }
