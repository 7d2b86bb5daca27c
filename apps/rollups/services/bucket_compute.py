"""The rows of rollup buckets, computed from their source of truth.

From samples: every trace of the pipeline that was analyzed complete and starts in
the bucket gives an end-to-end wall value (with its error flag and, when the
pipeline has an objective, whether it met the threshold) and an untracked
critical-path value; every stage sample gives its stage a wall and a critical value.
A trace opened again by new spans keeps counting with its last analyzed values, like
its stage samples, until it is analyzed again.

From children: the finer buckets' rows are merged (sketches merged exactly, sums,
counts and maxima combined), which gives the same rows as computing from samples.

Samples are read at most ``CHUNK_S`` seconds of trace starts per query, many
buckets per query when they are short, several queries merged when a bucket is
long (an hour rebuilt from samples), so memory stays bounded.

Values beyond the sketch's range (a root span stamped days apart) are clipped to
it, so that one broken trace cannot stop its bucket from being written.
"""

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.db.models import IntegerField, Q
from django.db.models.functions import Cast, Coalesce
from numpy.typing import NDArray

from apps.analysis.models import StageSample
from apps.core.time import NS_PER_MS, NS_PER_S, align_down, to_datetime, to_seconds
from apps.ingest.models import Trace
from apps.pipelines.models import Pipeline
from apps.rollups.models import (
    ALL_MODELS,
    E2E_STAGE_ID,
    UNTRACKED_STAGE_ID,
    LlmBucket,
    Measure,
    RollupBucket,
)
from apps.rollups.selectors.int_columns import int_columns
from apps.rollups.services.retention import CHILD
from apps.rollups.sketches.ddsketch import MAX_VALUE_MS, Sketch
from apps.rollups.sketches.merge_batch import Blob, merged_groups

MAX_NS = int(MAX_VALUE_MS) * NS_PER_MS
# Two minutes of a pipeline at 4,000 traces/s is ~10 M values, ~400 MB fetched.
CHUNK_S = 120


@dataclass(frozen=True)
class PipelineInfo:
    id: int
    team_id: int
    objective_threshold_ms: int | None


@dataclass(frozen=True)
class Part:
    """Totals and sketch of some of one bucket's values."""

    count: int
    errors: int
    good: int
    sum_ns: int
    max_ns: int
    sketch: Sketch


# (bucket start in epoch seconds, stage id, measure)
Key = tuple[int, int, int]
Parts = defaultdict[Key, list[Part]]


def pipelines_info(ids: set[int]) -> dict[int, PipelineInfo]:
    rows = Pipeline.objects.filter(id__in=ids).values_list(
        "id", "team_id", "objective_threshold_ms"
    )
    return {row[0]: PipelineInfo(*row) for row in rows}


def _runs(starts: list[int], width: int) -> list[tuple[int, int]]:
    """Sorted bucket starts (seconds) as maximal [from, to) runs of adjacent buckets."""
    runs: list[tuple[int, int]] = []
    for start in starts:
        if runs and runs[-1][1] == start:
            runs[-1] = (runs[-1][0], start + width)
        else:
            runs.append((start, start + width))
    return runs


def _query_ranges(starts: list[int], width: int) -> list[list[tuple[int, int]]]:
    """The buckets' time as groups of [from, to) ranges of at most CHUNK_S seconds
    in all, one group per query; ranges are cut at multiples of CHUNK_S."""
    pieces = []
    for low, high in _runs(starts, width):
        while low < high:
            cut = min(high, align_down(low, CHUNK_S) + CHUNK_S)
            pieces.append((low, cut))
            low = cut
    groups: list[list[tuple[int, int]]] = []
    covered = CHUNK_S
    for low, high in pieces:
        if covered + high - low > CHUNK_S:
            groups.append([])
            covered = 0
        if groups[-1] and groups[-1][-1][1] == low:
            groups[-1][-1] = (groups[-1][-1][0], high)
        else:
            groups[-1].append((low, high))
        covered += high - low
    return groups


def _groups(*keys: NDArray[np.int64]) -> list[NDArray[np.intp]]:
    """Index runs of rows with equal ``keys``."""
    order = np.lexsort(keys[::-1])
    if not len(order):
        return []
    changed = np.zeros(len(order) - 1, dtype=bool)
    for key in keys:
        sorted_key = key[order]
        changed |= sorted_key[1:] != sorted_key[:-1]
    return np.split(order, np.flatnonzero(changed) + 1)


def _part(values_ns: NDArray[np.int64], errors: int, good: int = 0) -> Part:
    values = np.clip(values_ns, 0, MAX_NS)
    return Part(
        count=len(values),
        errors=errors,
        good=good,
        sum_ns=int(values.sum()),
        max_ns=int(values.max()),
        sketch=Sketch.from_values(values / NS_PER_MS),
    )


def _bucket_of(start_ns: NDArray[np.int64], resolution: int) -> NDArray[np.int64]:
    """``align_down`` of each start's epoch second, over a whole array at once."""
    seconds = start_ns // NS_PER_S
    return seconds - seconds % resolution


def rows_from_samples(
    pipeline: PipelineInfo, resolution: int, starts: list[int]
) -> tuple[list[RollupBucket], list[LlmBucket]]:
    """RollupBucket and LlmBucket rows of the buckets starting at ``starts`` (sorted epoch
    seconds), from traces and stage samples: two queries per CHUNK_S seconds of buckets.

    One samples query serves both tables: a second one for the samples that name a model
    scanned the same rows again, which cost more than the four columns it added here.
    """
    parts: Parts = defaultdict(list)
    llm: LlmParts = defaultdict(list)
    for ranges in _query_ranges(starts, resolution):
        q = Q()
        for low, high in ranges:
            q |= Q(start_ns__gte=low * NS_PER_S, start_ns__lt=high * NS_PER_S)
        traces = int_columns(
            Trace.objects.filter(
                q, team_id=pipeline.team_id, pipeline_id=pipeline.id, incomplete=False,
                end_ns__isnull=False,
            ),
            "start_ns", "end_ns", Cast("error", IntegerField()), "untracked_critical_ns",
        )  # fmt: skip
        samples = int_columns(
            StageSample.objects.filter(q, pipeline_id=pipeline.id),
            "start_ns", "stage_id", "wall_ns", "critical_ns", Cast("error", IntegerField()),
            Coalesce("model_id", _NONE), Coalesce("output_tokens", _NONE),
            Coalesce("generation_ns", _NONE), Coalesce("max_gap_ns", _NONE),
        )  # fmt: skip
        _add_traces(parts, traces, resolution, pipeline.objective_threshold_ms)
        stage_parts = _add_samples(parts, samples, resolution)
        _add_llm_samples(llm, samples, resolution, stage_parts)
    return _rows(pipeline, resolution, parts), _llm_rows(pipeline, resolution, llm)


def _add_traces(
    parts: Parts, traces: NDArray[np.int64], resolution: int, threshold_ms: int | None
) -> None:
    buckets = _bucket_of(traces[:, 0], resolution)
    e2e = np.maximum(traces[:, 1] - traces[:, 0], 0)
    errors, untracked = traces[:, 2], traces[:, 3]
    for group in _groups(buckets):
        start, values = int(buckets[group[0]]), e2e[group]
        good = 0 if threshold_ms is None else int((values <= threshold_ms * NS_PER_MS).sum())
        error_count = int(errors[group].sum())
        parts[(start, E2E_STAGE_ID, Measure.WALL)].append(_part(values, error_count, good))
        parts[(start, UNTRACKED_STAGE_ID, Measure.CRITICAL)].append(
            _part(untracked[group], error_count)
        )


def _add_samples(
    parts: Parts, samples: NDArray[np.int64], resolution: int
) -> dict[tuple[int, int], tuple[Part, Part]]:
    """Adds the wall and critical parts of each (bucket, stage); returns them by that key."""
    added: dict[tuple[int, int], tuple[Part, Part]] = {}
    buckets = _bucket_of(samples[:, 0], resolution)
    stages = samples[:, 1]
    for group in _groups(buckets, stages):
        start, stage_id = int(buckets[group[0]]), int(stages[group[0]])
        error_count = int(samples[group, 4].sum())
        wall = _part(samples[group, 2], error_count)
        critical = _part(samples[group, 3], error_count)
        parts[(start, stage_id, Measure.WALL)].append(wall)
        parts[(start, stage_id, Measure.CRITICAL)].append(critical)
        added[(start, stage_id)] = (wall, critical)
    return added


def rows_from_children(
    pipeline: PipelineInfo, resolution: int, starts: list[int]
) -> list[RollupBucket]:
    """Rows of the buckets starting at ``starts`` merged from the next finer
    resolution's rows, fetched in one query."""
    children = RollupBucket.objects.filter(
        _children_of(starts, resolution), pipeline_id=pipeline.id, resolution=CHILD[resolution]
    ).values_list(
        "bucket_start", "stage_id", "measure", "count", "error_count", "good_count",
        "sum_ns", "max_ns", "sketch",
    )  # fmt: skip
    parts = _merged_children(
        (
            (align_down(to_seconds(when), resolution), stage_id, measure),
            count, errors, good, sum_ns, max_ns, sketch,
        )
        for when, stage_id, measure, count, errors, good, sum_ns, max_ns, sketch in children
    )  # fmt: skip
    return _rows(pipeline, resolution, parts)


def _children_of(starts: list[int], resolution: int) -> Q:
    ranges = Q()
    for low, high in _runs(starts, resolution):
        ranges |= Q(bucket_start__gte=to_datetime(low), bucket_start__lt=to_datetime(high))
    return ranges


# A child row: its parent's key, count, errors, good count, sum ns, max ns, sketch.
Child = tuple[Any, int, int, int, int, int, Blob]


def _merged_children(children: Iterable[Child]) -> defaultdict[Any, list[Part]]:
    """One Part per parent key: the children's totals added up, and their sketches merged.

    Where keys have several children (a day merges 24 hours, an hour six ten-minute
    buckets) the sketches are decoded and merged in one batch by ``merged_groups``, which
    gives exactly what merging them one by one gives, at a fraction of the cost past a
    few dozen sketches; one child a key is decoded alone, cheaper than the batch's setup.
    """
    labels: dict[Any, int] = {}
    totals: list[list[int]] = []
    blobs: list[Blob] = []
    groups: list[int] = []
    for key, count, errors, good, sum_ns, max_ns, sketch in children:
        label = labels.setdefault(key, len(labels))
        if label == len(totals):
            totals.append([count, errors, good, sum_ns, max_ns])
        else:
            row = totals[label]
            row[0] += count
            row[1] += errors
            row[2] += good
            row[3] += sum_ns
            row[4] = max(row[4], max_ns)
        blobs.append(sketch)
        groups.append(label)
    if len(blobs) > len(labels):
        sketches = merged_groups(blobs=blobs, groups=groups, group_count=len(labels))
    else:
        sketches = [Sketch.from_bytes(bytes(blob)) for blob in blobs]
    parts: defaultdict[Any, list[Part]] = defaultdict(list)
    for key, label in labels.items():
        count, errors, good, sum_ns, max_ns = totals[label]
        parts[key].append(Part(count, errors, good, sum_ns, max_ns, sketches[label]))
    return parts


def _bucket_fields(
    pipeline: PipelineInfo, resolution: int, start: int, members: list[Part]
) -> dict[str, Any]:
    """The columns RollupBucket and LlmBucket share: where the bucket is, and the totals
    and merged sketch of its members."""
    sketch = members[0].sketch if len(members) == 1 else Sketch.merged(m.sketch for m in members)
    return {
        "team_id": pipeline.team_id,
        "pipeline_id": pipeline.id,
        "resolution": resolution,
        "bucket_start": to_datetime(start),
        "count": sum(m.count for m in members),
        "error_count": sum(m.errors for m in members),
        "sum_ns": sum(m.sum_ns for m in members),
        "max_ns": max(m.max_ns for m in members),
        "sketch": sketch.to_bytes(),
    }


def _rows(pipeline: PipelineInfo, resolution: int, parts: Parts) -> list[RollupBucket]:
    return [
        RollupBucket(
            stage_id=stage_id,
            measure=measure,
            good_count=sum(m.good for m in members),
            **_bucket_fields(pipeline, resolution, start, members),
        )
        for (start, stage_id, measure), members in sorted(parts.items())
    ]


# What LLM calls say, rolled up apart (LlmBucket): (bucket start, stage id, model id, measure)
LlmKey = tuple[int, int, int, int]
LlmParts = defaultdict[LlmKey, list[Part]]
_NONE = -1  # a NULL column, as the integer fetch brings it


def stream_values(
    samples: NDArray[np.int64],
) -> dict[int, tuple[NDArray[np.bool_], NDArray[np.int64]]]:
    """Per streaming measure, which samples have a value and the values, from the columns
    (…, output tokens at 6, generation ns at 7, longest gap ns at 8)."""
    tokens, generation, gap = samples[:, 6], samples[:, 7], samples[:, 8]
    streamed = generation >= 0
    with np.errstate(divide="ignore", invalid="ignore"):
        per_token = np.where(tokens > 1, generation / np.maximum(tokens - 1, 1), 0)
        per_second = np.where(
            generation > 0, tokens * (NS_PER_S * NS_PER_MS) / np.maximum(generation, 1), 0
        )
    return {
        Measure.TIME_PER_OUTPUT_TOKEN: (
            streamed & (tokens > 1),
            np.rint(per_token).astype(np.int64),
        ),
        Measure.OUTPUT_TOKENS_PER_S: (
            streamed & (tokens > 0) & (generation > 0),
            np.rint(per_second).astype(np.int64),
        ),
        Measure.MAX_CHUNK_GAP: (streamed & (gap >= 0), gap),
    }


def _add_llm_samples(
    parts: LlmParts,
    samples: NDArray[np.int64],
    resolution: int,
    stage_parts: dict[tuple[int, int], tuple[Part, Part]],
) -> None:
    """LlmBucket parts of the samples (columns 5 to 8 as ``stream_values`` reads them) that
    name a model or carry a streamed answer.

    A part over the same rows as one already made is that part: a model that answered
    every sample of its stage (one model per stage is the rule) has the stage's wall and
    critical parts (``stage_parts``, from ``_add_samples``), and one that gave every
    streamed answer of its stage has the stage's parts for every model together. The
    rows of a model's part are among those of the stage's, so equal counts mean the same
    rows, the same totals and the same sketch.
    """
    samples = samples[(samples[:, 5] >= 0) | (samples[:, 7] >= 0)]
    if not len(samples):
        return
    buckets = _bucket_of(samples[:, 0], resolution)
    stages, models, errors = samples[:, 1], samples[:, 5], samples[:, 4]
    streams = stream_values(samples)
    every: dict[LlmKey, Part] = {}
    for group in _groups(buckets, stages):
        start, stage_id = int(buckets[group[0]]), int(stages[group[0]])
        for measure, (present, values) in streams.items():
            chosen = group[present[group]]
            if len(chosen):
                key = (start, stage_id, ALL_MODELS, measure)
                every[key] = _part(values[chosen], int(errors[chosen].sum()))
                parts[key].append(every[key])
    named = np.flatnonzero(models >= 0)
    for group in _groups(buckets[named], stages[named], models[named]):
        rows = named[group]
        start, stage_id, model_id = (
            int(buckets[rows[0]]),
            int(stages[rows[0]]),
            int(models[rows[0]]),
        )
        wall, critical = stage_parts[(start, stage_id)]
        if len(rows) != wall.count:
            error_count = int(errors[rows].sum())
            wall = _part(samples[rows, 2], error_count)
            critical = _part(samples[rows, 3], error_count)
        parts[(start, stage_id, model_id, Measure.WALL)].append(wall)
        parts[(start, stage_id, model_id, Measure.CRITICAL)].append(critical)
        for measure, (present, values) in streams.items():
            chosen = rows[present[rows]]
            if len(chosen):
                part = every[(start, stage_id, ALL_MODELS, measure)]
                if len(chosen) != part.count:
                    part = _part(values[chosen], int(errors[chosen].sum()))
                parts[(start, stage_id, model_id, measure)].append(part)


def llm_rows_from_children(
    pipeline: PipelineInfo, resolution: int, starts: list[int]
) -> list[LlmBucket]:
    children = LlmBucket.objects.filter(
        _children_of(starts, resolution), pipeline_id=pipeline.id, resolution=CHILD[resolution]
    ).values_list(
        "bucket_start", "stage_id", "model_id", "measure", "count", "error_count", "sum_ns",
        "max_ns", "sketch",
    )  # fmt: skip
    parts = _merged_children(
        (
            (align_down(to_seconds(when), resolution), stage_id, model_id, measure),
            count, errors, 0, sum_ns, max_ns, sketch,
        )
        for when, stage_id, model_id, measure, count, errors, sum_ns, max_ns, sketch in children
    )  # fmt: skip
    return _llm_rows(pipeline, resolution, parts)


def _llm_rows(pipeline: PipelineInfo, resolution: int, parts: LlmParts) -> list[LlmBucket]:
    return [
        LlmBucket(
            stage_id=stage_id,
            model_id=model_id,
            measure=measure,
            **_bucket_fields(pipeline, resolution, start, members),
        )
        for (start, stage_id, model_id, measure), members in sorted(parts.items())
    ]
