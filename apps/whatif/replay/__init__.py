"""Replaying many traces at once under a scenario, with NumPy.

The traces' events are evaluated level by level: a level holds every event whose
dependencies are all in lower levels, in every trace at once, so a replay costs a
few array operations per level (about twice the depth of the deepest trace), not
per span. The critical path is then walked back from each root's end along the
dependency that set each event's time, which charges every nanosecond of the
end-to-end time to one stage or to untracked time, exactly.
"""

from dataclasses import dataclass

import numpy as np

from apps.whatif.replay.critical import critical_times
from apps.whatif.replay.edges import live_edges, node_caps, portions
from apps.whatif.replay.model import ReplayModel, replay_model
from apps.whatif.replay.types import Floats
from apps.whatif.replay.walls import stage_walls, token_times
from apps.whatif.scenario import Scenario

__all__ = ["ReplayModel", "ReplayResult", "replay", "replay_model"]


@dataclass(frozen=True)
class ReplayResult:
    """Per trace: end-to-end time, each stage's wall time (NaN where the trace has no
    span in it) and critical-path time (the last column is untracked), in ns."""

    e2e_ns: Floats
    wall_ns: Floats
    critical_ns: Floats
    node_time: Floats


def replay(model: ReplayModel, scenario: Scenario, *, figures: bool = True) -> ReplayResult:
    """Every trace of the model under the scenario (``Scenario()`` reproduces them).

    Without ``figures`` only the end-to-end times are computed (the stage columns are
    empty): what the lever finder needs, at a fraction of the cost.
    """
    portion_a, portion_b = portions(model, scenario)
    weight = portion_a + portion_b + model.edge_fixed
    live = live_edges(model, scenario)
    weight = np.where(live, weight, -np.inf)
    cap_ends, cap_starts, cap_ns, cap_levels = node_caps(model, scenario)

    value = np.full(len(model.node_time), -np.inf)
    value[model.root_start] = 0.0
    src = model.edge_src
    for index, (lo, hi) in enumerate(model.level_edges):
        if hi == lo:
            continue
        candidates = value[src[lo:hi]] + weight[lo:hi]
        value[model.level_nodes[index]] = np.maximum.reduceat(candidates, model.level_runs[index])
        if len(cap_levels):
            at = cap_levels == index + 1
            if at.any():
                ends = cap_ends[at]
                value[ends] = np.minimum(value[ends], value[cap_starts[at]] + cap_ns[at])

    e2e = value[model.root_end] - value[model.root_start]
    if not figures:
        empty = np.zeros((model.trace_count, 0))
        return ReplayResult(e2e_ns=e2e, wall_ns=empty, critical_ns=empty, node_time=value)
    critical = critical_times(
        model, value, weight, portion_a, portion_b, cap_ends, cap_starts, cap_ns
    )
    tokens = token_times(model, value, portion_a)
    wall, _ = stage_walls(model, value, tokens)
    return ReplayResult(
        e2e_ns=e2e,
        wall_ns=wall,
        critical_ns=critical,
        node_time=value,
    )
