"""Each stage's wall time per trace, from the replayed times of its span parts."""

from typing import TYPE_CHECKING

import numpy as np

from apps.whatif.dependency import NO_STAGE
from apps.whatif.replay.types import Bools, Floats

if TYPE_CHECKING:
    from apps.whatif.replay.model import ReplayModel


def observed_token_times(model: "ReplayModel", times: Floats) -> Floats:
    starts = times[model.span_start_node]
    return starts + np.maximum(model.span_token_offset, 0.0)


def token_times(model: "ReplayModel", value: Floats, portion_a: Floats) -> Floats:
    """Where each split span's first token falls after the replay: a leaf's first portion
    after its start; a span with children keeps its offset, scaled with its first stage."""
    starts = value[model.span_start_node]
    ends = value[model.span_start_node + 1]
    tokens = starts + np.maximum(model.span_token_offset, 0.0)
    leaf = np.flatnonzero(model.span_duration_edge >= 0)
    edges = model.span_duration_edge[leaf]
    before = model.span_before_stage[leaf]
    before = np.where(before == NO_STAGE, model.stage_count, before)
    # A first token at the span's start leaves no first portion: the edge is all after it.
    first = np.where(model.edge_stage_a[edges] == before, portion_a[edges], 0.0)
    tokens[leaf] = starts[leaf] + first
    return np.clip(tokens, starts, np.maximum(starts, ends))


def stage_walls(model: "ReplayModel", value: Floats, tokens: Floats) -> tuple[Floats, Bools]:
    """Each stage's wall time per trace: the union of its span parts (NaN where none)."""
    stages = model.stage_count
    starts = value[model.span_start_node]
    ends = np.maximum(value[model.span_start_node + 1], starts)
    split = (model.span_token_offset >= 0) & (model.span_before_stage != model.span_after_stage)
    whole = ~split
    part_stage = np.concatenate(
        [
            model.span_before_stage[whole],
            model.span_before_stage[split],
            model.span_after_stage[split],
        ]
    )
    part_start = np.concatenate([starts[whole], starts[split], tokens[split]])
    part_end = np.concatenate([ends[whole], tokens[split], ends[split]])
    part_trace = np.concatenate(
        [model.span_trace[whole], model.span_trace[split], model.span_trace[split]]
    )
    keep = part_stage != NO_STAGE
    group = part_trace[keep] * stages + part_stage[keep]
    lo = np.rint(part_start[keep]).astype(np.int64)
    hi = np.rint(part_end[keep]).astype(np.int64)
    present = np.zeros(model.trace_count * stages, dtype=np.bool_)
    present[group] = True
    totals = np.zeros(model.trace_count * stages)
    if len(group):
        order = np.lexsort((lo, group))
        group, lo, hi = group[order], lo[order], hi[order]
        # A running reach of the ends within each group: offsetting each group above the
        # last lets one cumulative maximum serve them all.
        width = int(hi.max() - min(int(lo.min()), 0)) + 1
        rank = np.cumsum(np.r_[0, group[1:] != group[:-1]])
        offset = rank * width
        reach = np.maximum.accumulate(hi + offset) - offset
        previous = np.r_[np.iinfo(np.int64).min, reach[:-1]]
        previous[np.r_[True, group[1:] != group[:-1]]] = np.iinfo(np.int64).min
        added = np.maximum(hi - np.maximum(lo, previous), 0)
        totals = np.bincount(group, weights=added.astype(np.float64), minlength=len(totals)).astype(
            np.float64
        )
    walls = np.where(present, totals, np.nan).reshape(model.trace_count, stages)
    return walls, present.reshape(model.trace_count, stages)
