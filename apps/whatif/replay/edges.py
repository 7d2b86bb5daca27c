"""The replay's edges under a scenario: each edge's weight, which edges are live, the caps."""

import numpy as np

from apps.whatif.dependency import ALWAYS, IF_PARALLEL, NO_STAGE, UNLESS_PARALLEL
from apps.whatif.replay.model import ReplayModel
from apps.whatif.replay.types import Bools, Floats, Ints
from apps.whatif.scenario import Scenario


def _stage_factors(model: ReplayModel, scenario: Scenario) -> Floats:
    """Factor per (trace, stage) on the stage's own time; the last column (untracked) is 1."""
    factors = np.ones((model.trace_count, model.stage_count + 1))
    for stage, factor in scenario.scales.items():
        factors[:, stage] *= factor
    for stage, (ratio, hit_ns) in scenario.caches.items():
        hits = scenario.cache_hits(model.trace_keys, stage, ratio)
        observed = model.observed_wall_ns[:, stage]
        usable = hits & (observed > 0)
        factors[usable, stage] = hit_ns / observed[usable]
    for stage in scenario.removed:
        factors[:, stage] = 0.0
    _levers(model, scenario, factors)
    return factors


def _levers(model: ReplayModel, scenario: Scenario, factors: Floats) -> None:
    """The client's levers on each trace's stage time as the other changes left it."""
    for stage in sorted(set(scenario.hedges) | set(scenario.fallbacks)):
        observed = model.observed_wall_ns[:, stage]
        ran = np.isfinite(observed) & (observed > 0)
        now = np.where(ran, observed * factors[:, stage], np.nan)
        changed = now.copy()
        if stage in scenario.hedges:
            delay = scenario.hedges[stage]
            second = scenario.second_attempts(model.trace_keys, stage, now)
            late = ran & (now > delay)
            changed[late] = np.minimum(now[late], delay + second[late])
        if stage in scenario.fallbacks:
            after, then = scenario.fallbacks[stage]
            late = ran & (changed > after)
            changed[late] = after + then
        factors[ran, stage] = changed[ran] / observed[ran]


def portions(model: ReplayModel, scenario: Scenario) -> tuple[Floats, Floats]:
    """Each edge's two stage portions under the scenario."""
    factors = _stage_factors(model, scenario)
    trace = model.edge_trace
    portion_a = model.edge_ns_a * factors[trace, model.edge_stage_a]
    portion_b = model.edge_ns_b * factors[trace, model.edge_stage_b]
    for stage, shift_ns in scenario.shifts.items():
        if stage in scenario.removed:
            continue
        hit = None
        if stage in scenario.caches:
            hit = scenario.cache_hits(model.trace_keys, stage, scenario.caches[stage][0])
        portion_a, portion_b = _shifted(model, stage, shift_ns, portion_a, portion_b, hit)
    for stage, cap_ns in scenario.caps.items():
        duration = model.edge_duration
        portion_a = np.where(
            duration & (model.edge_stage_a == stage), np.minimum(portion_a, cap_ns), portion_a
        )
        portion_b = np.where(
            duration & (model.edge_stage_b == stage), np.minimum(portion_b, cap_ns), portion_b
        )
    return portion_a, portion_b


def _shifted(
    model: ReplayModel,
    stage: int,
    shift_ns: float,
    portion_a: Floats,
    portion_b: Floats,
    cache_hits: Bools | None,
) -> tuple[Floats, Floats]:
    """Every span's own time in ``stage`` moved by ``shift_ns`` (not below zero), spread
    over its pieces in proportion; cache hits keep their hit time."""
    in_a = (model.edge_stage_a == stage) & model.edge_primary
    in_b = (model.edge_stage_b == stage) & model.edge_primary
    spans = len(model.span_start_node)
    own = np.zeros(spans)
    own += np.bincount(model.edge_owner[in_a], weights=portion_a[in_a], minlength=spans)
    own += np.bincount(model.edge_owner[in_b], weights=portion_b[in_b], minlength=spans)
    ratio = np.ones(spans)
    moved = own > 0
    ratio[moved] = np.maximum(own[moved] + shift_ns, 0.0) / own[moved]
    if cache_hits is not None:
        ratio[cache_hits[model.span_trace]] = 1.0
    owner_ratio = ratio[model.edge_owner]
    portion_a = np.where(model.edge_stage_a == stage, portion_a * owner_ratio, portion_a)
    portion_b = np.where(model.edge_stage_b == stage, portion_b * owner_ratio, portion_b)
    return portion_a, portion_b


def live_edges(model: ReplayModel, scenario: Scenario) -> Bools:
    toggle = model.edge_toggle
    if not scenario.parallel:
        return toggle != IF_PARALLEL
    count = model.stage_count
    pairs = np.zeros((count + 1, count + 1), dtype=np.bool_)  # row/column ``count``: none
    for first, second in scenario.parallel:
        pairs[first, second] = pairs[second, first] = True
    a = np.where(model.edge_pair_a == NO_STAGE, count, model.edge_pair_a)
    b = np.where(model.edge_pair_b == NO_STAGE, count, model.edge_pair_b)
    parallel = pairs[a, b]
    return (
        (toggle == ALWAYS)
        | ((toggle == UNLESS_PARALLEL) & ~parallel)
        | ((toggle == IF_PARALLEL) & parallel)
    )


def node_caps(model: ReplayModel, scenario: Scenario) -> tuple[Ints, Ints, Floats, Ints]:
    """Spans that wait on children, wholly in a capped stage: (end node, start node, cap,
    level), to cut their end after their children are evaluated."""
    if not scenario.caps:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, np.zeros(0), empty
    caps = np.full(model.stage_count + 1, np.inf)
    for stage, cap_ns in scenario.caps.items():
        caps[stage] = cap_ns
    whole = np.where(model.span_whole_stage == NO_STAGE, model.stage_count, model.span_whole_stage)
    span_caps = caps[whole]
    chosen = np.flatnonzero(np.isfinite(span_caps) & ~model.span_is_leaf)
    starts = model.span_start_node[chosen]
    ends = starts + 1
    return ends, starts, span_caps[chosen], model.node_level[ends]
