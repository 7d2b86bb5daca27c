"""The rows of rollup buckets, computed from their source of truth.

From samples: every trace of the pipeline that was finalized complete and starts in
the bucket gives an end-to-end wall value (with its error flag and, when the
pipeline has an objective, whether it met the threshold) and an untracked
critical-path value; every stage sample gives its stage a wall and a critical value.
A trace reopened by late spans keeps counting with its last finalized values, like
its stage samples, until it is finalized again.

From children: the finer buckets' rows are merged (sketches merged exactly, sums,
counts and maxima combined), which gives the same rows as computing from samples.

Values beyond the sketch's range (a root span stamped days apart) are clipped to
it, so that one broken trace cannot stop its bucket from being written.
"""

from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np
from django.db.models import IntegerField, Q
from django.db.models.functions import Cast
from numpy.typing import NDArray

from apps.ingest.models import Trace
from apps.pipelines.models import Pipeline
from apps.rollups.models import (
    E2E_STAGE_ID,
    UNTRACKED_STAGE_ID,
    Measure,
    RollupBucket,
    StageSample,
)
from apps.rollups.services.rollup_fetch import int_columns
from apps.rollups.services.rollup_retention import CHILD
from apps.rollups.sketch import MAX_VALUE_MS, Sketch

NS_PER_S = 1_000_000_000
NS_PER_MS = 1_000_000
MAX_NS = int(MAX_VALUE_MS) * NS_PER_MS


@dataclass(frozen=True)
class PipelineInfo:
    id: int
    team_id: int
    objective_threshold_ms: int | None


def pipelines_info(ids: set[int]) -> dict[int, PipelineInfo]:
    rows = Pipeline.objects.filter(id__in=ids).values_list(
        "id", "team_id", "objective_threshold_ms"
    )
    return {row[0]: PipelineInfo(*row) for row in rows}


def as_datetime(seconds: int) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


def _runs(starts: list[int], width: int) -> list[tuple[int, int]]:
    """Sorted bucket starts (seconds) as maximal [from, to) runs of adjacent buckets."""
    runs: list[tuple[int, int]] = []
    for start in starts:
        if runs and runs[-1][1] == start:
            runs[-1] = (runs[-1][0], start + width)
        else:
            runs.append((start, start + width))
    return runs


def _ns_ranges(starts: list[int], width: int) -> Q:
    q = Q()
    for low, high in _runs(starts, width):
        q |= Q(start_ns__gte=low * NS_PER_S, start_ns__lt=high * NS_PER_S)
    return q


def _groups(*keys: NDArray[np.int64]) -> tuple[NDArray[np.intp], list[NDArray[np.intp]]]:
    """Row order sorted by ``keys`` (first key major), and the index runs of equal keys."""
    order = np.lexsort(keys[::-1])
    if not len(order):
        return order, []
    changed = np.zeros(len(order) - 1, dtype=bool)
    for key in keys:
        sorted_key = key[order]
        changed |= sorted_key[1:] != sorted_key[:-1]
    return order, np.split(order, np.flatnonzero(changed) + 1)


class _Rows:
    def __init__(self, pipeline: PipelineInfo, resolution: int) -> None:
        self.pipeline = pipeline
        self.resolution = resolution
        self.rows: list[RollupBucket] = []

    def add(
        self,
        start: int,
        stage_id: int,
        measure: int,
        values_ns: NDArray[np.int64],
        errors: int,
        good: int = 0,
    ) -> None:
        values = np.clip(values_ns, 0, MAX_NS)
        self.rows.append(
            RollupBucket(
                team_id=self.pipeline.team_id,
                pipeline_id=self.pipeline.id,
                stage_id=stage_id,
                measure=measure,
                resolution=self.resolution,
                bucket_start=as_datetime(start),
                count=len(values),
                error_count=errors,
                good_count=good,
                sum_ns=int(values.sum()),
                max_ns=int(values.max()),
                sketch=Sketch.from_values(values / NS_PER_MS).to_bytes(),
            )
        )


def _bucket_of(start_ns: NDArray[np.int64], resolution: int) -> NDArray[np.int64]:
    seconds = start_ns // NS_PER_S
    return seconds - seconds % resolution


def rows_from_samples(
    pipeline: PipelineInfo, resolution: int, starts: list[int]
) -> list[RollupBucket]:
    """Rows of the buckets starting at ``starts`` (sorted epoch seconds), from traces
    and stage samples: two queries whatever the number of buckets."""
    if not starts:
        return []
    ranges = _ns_ranges(starts, resolution)
    traces = int_columns(
        Trace.objects.filter(
            ranges,
            team_id=pipeline.team_id,
            pipeline_id=pipeline.id,
            incomplete=False,
            end_ns__isnull=False,
        ),
        "start_ns", "end_ns", Cast("error", IntegerField()), "untracked_critical_ns",
    )  # fmt: skip
    samples = int_columns(
        StageSample.objects.filter(ranges, pipeline_id=pipeline.id),
        "start_ns", "stage_id", "wall_ns", "critical_ns", Cast("error", IntegerField()),
    )  # fmt: skip
    out = _Rows(pipeline, resolution)
    _add_traces(out, traces)
    _add_samples(out, samples)
    return out.rows


def _add_traces(out: _Rows, traces: NDArray[np.int64]) -> None:
    buckets = _bucket_of(traces[:, 0], out.resolution)
    e2e = np.maximum(traces[:, 1] - traces[:, 0], 0)
    errors, untracked = traces[:, 2], traces[:, 3]
    threshold = out.pipeline.objective_threshold_ms
    for group in _groups(buckets)[1]:
        start, values = int(buckets[group[0]]), e2e[group]
        good = 0 if threshold is None else int((values <= threshold * NS_PER_MS).sum())
        error_count = int(errors[group].sum())
        out.add(start, E2E_STAGE_ID, Measure.WALL, values, error_count, good)
        out.add(start, UNTRACKED_STAGE_ID, Measure.CRITICAL, untracked[group], error_count)


def _add_samples(out: _Rows, samples: NDArray[np.int64]) -> None:
    buckets = _bucket_of(samples[:, 0], out.resolution)
    stages = samples[:, 1]
    for group in _groups(buckets, stages)[1]:
        start, stage_id = int(buckets[group[0]]), int(stages[group[0]])
        error_count = int(samples[group, 4].sum())
        out.add(start, stage_id, Measure.WALL, samples[group, 2], error_count)
        out.add(start, stage_id, Measure.CRITICAL, samples[group, 3], error_count)


def rows_from_children(
    pipeline: PipelineInfo, resolution: int, starts: list[int]
) -> list[RollupBucket]:
    """Rows of the buckets starting at ``starts`` merged from the next finer
    resolution's rows, fetched in one query."""
    if not starts:
        return []
    ranges = Q()
    for low, high in _runs(starts, resolution):
        ranges |= Q(bucket_start__gte=as_datetime(low), bucket_start__lt=as_datetime(high))
    children = RollupBucket.objects.filter(
        ranges, pipeline_id=pipeline.id, resolution=CHILD[resolution]
    ).values_list(
        "bucket_start", "stage_id", "measure", "count", "error_count", "good_count",
        "sum_ns", "max_ns", "sketch",
    )  # fmt: skip
    groups: dict[tuple[int, int, int], list[tuple[int, int, int, int, int, bytes]]] = defaultdict(
        list
    )
    for when, stage_id, measure, count, errors, good, sum_ns, max_ns, sketch in children:
        seconds = int(when.timestamp())
        key = (seconds - seconds % resolution, stage_id, measure)
        groups[key].append((count, errors, good, sum_ns, max_ns, bytes(sketch)))
    rows = []
    for (start, stage_id, measure), members in sorted(groups.items()):
        counts, errors, goods, sums, maxima, sketches = zip(*members, strict=True)
        merged = Sketch.merged(Sketch.from_bytes(data) for data in sketches)
        rows.append(
            RollupBucket(
                team_id=pipeline.team_id,
                pipeline_id=pipeline.id,
                stage_id=stage_id,
                measure=measure,
                resolution=resolution,
                bucket_start=as_datetime(start),
                count=sum(counts),
                error_count=sum(errors),
                good_count=sum(goods),
                sum_ns=sum(sums),
                max_ns=max(maxima),
                sketch=merged.to_bytes(),
            )
        )
    return rows
