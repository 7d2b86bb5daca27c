"""Changes compiled for a replay: stage indices, nanoseconds, and the cache draws.

Several changes to one stage combine in a fixed order, whatever the order given:
scale factors multiply, shifts add up (each span's own time, not below zero), a
cache hit replaces the stage's time in that trace, a removal zeroes it, and a cap
(the smallest, if several) cuts what is left. The client's levers act on the result:
a hedge (the shortest delay, if several) takes the sooner of the stage's time and its
delay plus a second attempt's time, drawn from the stage's own times in other traces; a
fallback (the shortest timeout) replaces a time past its timeout by the timeout plus the
fallback's time.
"""

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from apps.core.time import NS_PER_MS
from apps.whatif.changes import CACHE, CAP, FALLBACK, HEDGE, PARALLEL, REMOVE, SCALE, SHIFT, Change


@dataclass(frozen=True)
class Scenario:
    """What a replay changes, by stage index. ``Scenario()`` changes nothing."""

    scales: dict[int, float] = field(default_factory=dict)
    shifts: dict[int, float] = field(default_factory=dict)  # ns
    caches: dict[int, tuple[float, float]] = field(default_factory=dict)  # (ratio, hit ns)
    removed: frozenset[int] = frozenset()
    caps: dict[int, float] = field(default_factory=dict)  # ns
    parallel: tuple[tuple[int, int], ...] = ()
    seeds: dict[int, int] = field(default_factory=dict)  # per cached stage, from its slug
    hedges: dict[int, float] = field(default_factory=dict)  # delay, ns
    fallbacks: dict[int, tuple[float, float]] = field(default_factory=dict)  # (after, then) ns

    def second_attempts(
        self, trace_keys: npt.NDArray[np.int64], stage: int, times: npt.NDArray[np.float64]
    ) -> npt.NDArray[np.float64]:
        """A second attempt's time per trace: the stage's time in another trace that ran
        it, drawn the same way for the same traces and stage every time."""
        ran = times[np.isfinite(times) & (times > 0)]
        if not len(ran):
            return np.full(len(times), np.inf)
        draws = _uniform(trace_keys, (self.seeds.get(stage, stage) ^ _SECOND_ATTEMPT))
        return np.sort(ran)[np.minimum((draws * len(ran)).astype(np.int64), len(ran) - 1)]

    def cache_hits(
        self, trace_keys: npt.NDArray[np.int64], stage: int, ratio: float
    ) -> npt.NDArray[np.bool_]:
        """Which traces hit the stage's cache: a fixed draw per trace and stage slug, so the
        same scenario on the same traces always draws the same hits, and a higher ratio
        keeps every hit of a lower one."""
        return _uniform(trace_keys, self.seeds.get(stage, stage)) < ratio


def _uniform(keys: npt.NDArray[np.int64], seed: int) -> npt.NDArray[np.float64]:
    """A uniform number in [0, 1) per key (splitmix64 of key and seed)."""
    with np.errstate(over="ignore"):
        z = keys.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(seed)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) / float(1 << 53)


# Mixed into a stage's seed, so a second attempt's draw is not its cache draw.
_SECOND_ATTEMPT = 0x5EC0D


def _seed(slug: str) -> int:
    return int.from_bytes(hashlib.blake2b(slug.encode(), digest_size=8).digest(), "big")


def scenario_compile(
    changes: Sequence[Change],
    *,
    stage_slugs: Sequence[str],
    budgets_ms: Mapping[str, int | None],
) -> Scenario:
    """The changes by stage index; a cap at the budget uses ``budgets_ms[slug]``."""
    index = {slug: position for position, slug in enumerate(stage_slugs)}
    scales: dict[int, float] = {}
    shifts: dict[int, float] = {}
    caches: dict[int, tuple[float, float]] = {}
    removed: set[int] = set()
    caps: dict[int, float] = {}
    parallel: list[tuple[int, int]] = []
    seeds: dict[int, int] = {}
    hedges: dict[int, float] = {}
    fallbacks: dict[int, tuple[float, float]] = {}
    for change in changes:
        stage = index[change.stage]
        if change.op == SCALE:
            assert change.factor is not None
            scales[stage] = scales.get(stage, 1.0) * change.factor
        elif change.op == SHIFT:
            assert change.ms is not None
            shifts[stage] = shifts.get(stage, 0.0) + change.ms * NS_PER_MS
        elif change.op == CACHE:
            assert change.hit_ratio is not None
            assert change.hit_ms is not None
            caches[stage] = (change.hit_ratio, change.hit_ms * NS_PER_MS)
            seeds[stage] = _seed(change.stage)
        elif change.op == PARALLEL:
            assert change.with_stage is not None
            parallel.append((stage, index[change.with_stage]))
        elif change.op == REMOVE:
            removed.add(stage)
        elif change.op == CAP:
            cap_ms = change.ms if change.ms is not None else budgets_ms.get(change.stage)
            if cap_ms is not None:
                caps[stage] = min(caps.get(stage, np.inf), cap_ms * NS_PER_MS)
        elif change.op == HEDGE:
            assert change.ms is not None
            hedges[stage] = min(hedges.get(stage, np.inf), change.ms * NS_PER_MS)
            seeds.setdefault(stage, _seed(change.stage))
        elif change.op == FALLBACK:
            assert change.ms is not None
            assert change.fallback_ms is not None
            after = change.ms * NS_PER_MS
            if stage not in fallbacks or after < fallbacks[stage][0]:
                fallbacks[stage] = (after, change.fallback_ms * NS_PER_MS)
    return Scenario(
        scales=scales,
        shifts=shifts,
        caches=caches,
        removed=frozenset(removed),
        caps=caps,
        parallel=tuple(parallel),
        seeds=seeds,
        hedges=hedges,
        fallbacks=fallbacks,
    )
