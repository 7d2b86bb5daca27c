"""The critical path of replayed traces, walked back along the dependencies that bound."""

import numpy as np

from apps.whatif.replay.model import ReplayModel
from apps.whatif.replay.types import Floats, Ints


def critical_times(
    model: ReplayModel,
    value: Floats,
    weight: Floats,
    portion_a: Floats,
    portion_b: Floats,
    cap_ends: Ints,
    cap_starts: Ints,
    cap_ns: Floats,
) -> Floats:
    """Walk back from each root's end along the dependency that set each event's time."""
    stages = model.stage_count + 1
    untracked = stages - 1
    bound = np.isfinite(weight) & (value[model.edge_src] + weight == value[model.edge_dst])
    chosen = np.flatnonzero(bound)
    nodes, first = np.unique(model.edge_dst[chosen], return_index=True)
    binding = np.full(len(value), -1, dtype=np.int64)
    binding[nodes] = chosen[first]
    # An end cut by its cap was set by its start: the cap is the stage's time.
    cut = value[cap_starts] + cap_ns == value[cap_ends]
    cut_ends = cap_ends[cut]
    binding[cut_ends] = -2
    cut_start = dict(zip(cut_ends.tolist(), cap_starts[cut].tolist(), strict=True))
    cut_ns = dict(zip(cut_ends.tolist(), cap_ns[cut].tolist(), strict=True))
    span_of_start = {node: span for span, node in enumerate(model.span_start_node.tolist())}

    totals = np.zeros(model.trace_count * stages)
    trace_rows = np.arange(model.trace_count) * stages
    current = model.root_end.copy()
    active = current != model.root_start
    while active.any():
        rows = np.flatnonzero(active)
        edges = binding[current[rows]]
        by_cap = edges == -2
        for row in rows[by_cap].tolist():
            node = int(current[row])
            stage = int(model.span_whole_stage[span_of_start[cut_start[node]]])
            totals[trace_rows[row] + stage] += cut_ns[node]
            current[row] = cut_start[node]
        rows, edges = rows[~by_cap], edges[~by_cap]
        np.add.at(totals, trace_rows[rows] + model.edge_stage_a[edges], portion_a[edges])
        np.add.at(totals, trace_rows[rows] + model.edge_stage_b[edges], portion_b[edges])
        np.add.at(totals, trace_rows[rows] + untracked, model.edge_fixed[edges])
        current[rows] = model.edge_src[edges]
        active &= current != model.root_start
    return totals.reshape(model.trace_count, stages)
