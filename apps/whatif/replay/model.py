"""Many traces' dependency models as arrays, edges in the order they are evaluated."""

from dataclasses import dataclass

import numpy as np

from apps.whatif.dependency import ModelRows
from apps.whatif.replay.types import Bools, Floats, Ints
from apps.whatif.replay.walls import observed_token_times, stage_walls


@dataclass(frozen=True)
class ReplayModel:
    """Many traces' dependency models as arrays; edges sorted by their event's level."""

    stage_slugs: tuple[str, ...]
    trace_keys: Ints
    root_start: Ints  # node id per trace
    root_end: Ints
    node_trace: Ints
    node_time: Floats  # as observed, ns from the root's start
    # Per span
    span_trace: Ints
    span_start_node: Ints
    span_whole_stage: Ints
    span_is_leaf: Bools
    span_before_stage: Ints
    span_after_stage: Ints
    span_token_offset: Floats
    span_duration_edge: Ints  # -1 for spans that wait on children
    # Per edge, sorted by (level of dst, dst)
    edge_src: Ints
    edge_dst: Ints
    edge_owner: Ints
    edge_trace: Ints
    edge_stage_a: Ints
    edge_ns_a: Floats
    edge_stage_b: Ints
    edge_ns_b: Floats
    edge_fixed: Floats
    edge_duration: Bools
    edge_primary: Bools  # the first edge of its piece of time (the others repeat it)
    edge_toggle: Ints
    edge_pair_a: Ints
    edge_pair_b: Ints
    # Per level: the slice of edges, where each destination's run starts, the destinations
    level_edges: tuple[tuple[int, int], ...]
    level_runs: tuple[Ints, ...]
    level_nodes: tuple[Ints, ...]
    node_level: Ints
    observed_wall_ns: Floats  # (traces, stages); 0 where the stage has no span
    observed_present: Bools  # (traces, stages): the trace has a span part in the stage

    @property
    def trace_count(self) -> int:
        return len(self.trace_keys)

    @property
    def stage_count(self) -> int:
        return len(self.stage_slugs)


def replay_model(rows: ModelRows, stage_slugs: tuple[str, ...]) -> "ReplayModel":
    """The rows' arrays, edges in evaluation order; the observed times as a first replay."""
    edge_dst = np.asarray(rows.edge_dst, dtype=np.int64)
    node_level = np.asarray(rows.node_level, dtype=np.int64)
    order = np.lexsort((edge_dst, node_level[edge_dst])) if len(edge_dst) else edge_dst
    edge_src = np.asarray(rows.edge_src, dtype=np.int64)[order]
    edge_dst = edge_dst[order]
    edge_owner = np.asarray(rows.edge_owner, dtype=np.int64)[order]
    edge_duration = np.asarray(rows.edge_duration, dtype=np.bool_)[order]
    node_trace = np.asarray(rows.node_trace, dtype=np.int64)

    # A piece of time is repeated on the edges of every dependency it follows (each
    # joined child, the spare edges of parallel): counted once, on its first edge.
    edge_fields = (
        np.asarray(rows.edge_ns_a, dtype=np.float64)[order],
        np.asarray(rows.edge_ns_b, dtype=np.float64)[order],
        np.asarray(rows.edge_fixed, dtype=np.float64)[order],
    )
    primary = np.ones(len(order), dtype=np.bool_)
    if len(order):
        # Repeats share the destination and the owner; the first by original position wins.
        position = order.astype(np.int64)
        key = np.lexsort((position, edge_owner, edge_dst))
        same = (edge_dst[key][1:] == edge_dst[key][:-1]) & (
            edge_owner[key][1:] == edge_owner[key][:-1]
        )
        primary[key[1:][same]] = False

    span_count = len(rows.span_start_node)
    span_duration_edge = np.full(span_count, -1, dtype=np.int64)
    duration_edges = np.nonzero(edge_duration)[0]
    span_duration_edge[edge_owner[duration_edges]] = duration_edges

    levels = node_level[edge_dst]
    top = int(levels.max()) if len(levels) else 0
    bounds = np.searchsorted(levels, np.arange(top + 2))
    level_edges, level_runs, level_nodes = [], [], []
    for level in range(1, top + 1):
        lo, hi = int(bounds[level]), int(bounds[level + 1])
        dst = edge_dst[lo:hi]
        runs = np.flatnonzero(np.r_[True, dst[1:] != dst[:-1]]) if hi > lo else dst
        level_edges.append((lo, hi))
        level_runs.append(runs.astype(np.int64))
        level_nodes.append(dst[runs] if hi > lo else dst)

    base = np.asarray(rows.trace_node_base, dtype=np.int64)
    span_start_node = np.asarray(rows.span_start_node, dtype=np.int64)
    model = ReplayModel(
        stage_slugs=stage_slugs,
        trace_keys=np.asarray(rows.trace_keys, dtype=np.int64),
        root_start=base,
        root_end=base + 1,
        node_trace=node_trace,
        node_time=np.asarray(rows.node_time, dtype=np.float64),
        span_trace=node_trace[span_start_node] if span_count else span_start_node,
        span_start_node=span_start_node,
        span_whole_stage=np.asarray(rows.span_whole_stage, dtype=np.int64),
        span_is_leaf=np.asarray(rows.span_is_leaf, dtype=np.bool_),
        span_before_stage=np.asarray(rows.span_before_stage, dtype=np.int64),
        span_after_stage=np.asarray(rows.span_after_stage, dtype=np.int64),
        span_token_offset=np.asarray(rows.span_token_offset, dtype=np.float64),
        span_duration_edge=span_duration_edge,
        edge_src=edge_src,
        edge_dst=edge_dst,
        edge_owner=edge_owner,
        edge_trace=node_trace[edge_dst],
        edge_stage_a=np.asarray(rows.edge_stage_a, dtype=np.int64)[order],
        edge_ns_a=edge_fields[0],
        edge_stage_b=np.asarray(rows.edge_stage_b, dtype=np.int64)[order],
        edge_ns_b=edge_fields[1],
        edge_fixed=edge_fields[2],
        edge_duration=edge_duration,
        edge_primary=primary,
        edge_toggle=np.asarray(rows.edge_toggle, dtype=np.int64)[order],
        edge_pair_a=np.asarray(rows.edge_pair_a, dtype=np.int64)[order],
        edge_pair_b=np.asarray(rows.edge_pair_b, dtype=np.int64)[order],
        level_edges=tuple(level_edges),
        level_runs=tuple(level_runs),
        level_nodes=tuple(level_nodes),
        node_level=node_level,
        observed_wall_ns=np.zeros((len(base), len(stage_slugs))),
        observed_present=np.zeros((len(base), len(stage_slugs)), dtype=np.bool_),
    )
    times = model.node_time
    wall, present = stage_walls(model, times, observed_token_times(model, times))
    # Set once here, on a model no one else holds yet.
    object.__setattr__(model, "observed_wall_ns", np.nan_to_num(wall))
    object.__setattr__(model, "observed_present", present)
    return model
