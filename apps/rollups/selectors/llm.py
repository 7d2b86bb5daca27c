"""What a stage's LLM calls say, over a window of LlmBucket rows: how answers streamed,
which models served the stage, and each model's share over time.

Percentiles come from merged sketches, within 1 % of the exact values as everywhere
(``apps.rollups.selectors.percentiles``); a Distribution's "ms" are tokens a second for
OUTPUT_TOKENS_PER_S, as stored. A model's share is its samples over the
samples that name a model, in the window or in each point of the series.
"""

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

from apps.analysis.models import ServedModel
from apps.pipelines.models import Pipeline, Stage
from apps.rollups.models import ALL_MODELS, STREAM_MEASURES, LlmBucket, Measure
from apps.rollups.selectors.percentiles import Distribution
from apps.rollups.selectors.series import DEFAULT_MAX_POINTS, series_plan
from apps.rollups.selectors.windows import (
    Tile,
    Window,
    bucket_start_seconds,
    resolution_availability,
    tiles_filter,
    window_tiles,
)
from apps.rollups.sketches.merge_batch import Blob, merged_groups

# The measures as the pages and the API name them, in the order they are shown.
STREAM_NAMES = {
    Measure.TIME_PER_OUTPUT_TOKEN: "time_per_output_token",
    Measure.OUTPUT_TOKENS_PER_S: "output_tokens_per_s",
    Measure.MAX_CHUNK_GAP: "max_chunk_gap",
}


@dataclass(frozen=True)
class ModelFigures:
    model: ServedModel
    share: float  # of the samples in the window that name a model
    wall: Distribution
    critical: Distribution
    streams: dict[int, Distribution]


@dataclass(frozen=True)
class StageLlmFigures:
    window: Window
    streams: dict[int, Distribution]  # every model together; empty measures left out
    models: list[ModelFigures] = field(default_factory=list)  # the most samples first

    @property
    def empty(self) -> bool:
        return not self.streams and not self.models


def stage_llm_figures(
    *,
    pipeline: Pipeline,
    stage: Stage,
    start: int,
    end: int,
    available: Mapping[int, float] | None = None,
) -> StageLlmFigures:
    """The stage's streaming figures and its split by model over ``[start, end)``."""
    window, tiles = window_tiles(pipeline_id=pipeline.pk, start=start, end=end, available=available)
    rows = (
        LlmBucket.objects.filter(pipeline_id=pipeline.pk, stage_id=stage.pk)
        .filter(tiles_filter(tiles))
        .values_list("model_id", "measure", "count", "error_count", "sum_ns", "max_ns", "sketch")
    )
    totals: dict[tuple[int, int], Distribution] = defaultdict(Distribution)
    sketches: list[Blob] = []
    groups: list[int] = []
    scopes: dict[tuple[int, int], int] = {}
    for model_id, measure, count, errors, sum_ns, max_ns, blob in rows:
        if not count:
            continue
        total = totals[(model_id, measure)]
        total.count += count
        total.errors += errors
        total.sum_ns += sum_ns
        total.max_ns = max(total.max_ns, max_ns)
        sketches.append(blob)
        groups.append(scopes.setdefault((model_id, measure), len(scopes)))
    merged = merged_groups(blobs=sketches, groups=groups, group_count=len(scopes))
    for scope, sketch in zip(scopes, merged, strict=True):
        totals[scope].sketch = sketch
    streams: dict[int, Distribution] = {
        measure: totals[(ALL_MODELS, measure)]
        for measure in STREAM_MEASURES
        if (ALL_MODELS, measure) in totals
    }
    model_ids = {model_id for model_id, _ in totals if model_id != ALL_MODELS}
    named = sum(totals[(model_id, Measure.WALL)].count for model_id in model_ids)
    served = ServedModel.objects.in_bulk(model_ids)
    models = [
        ModelFigures(
            model=served[model_id],
            share=totals[(model_id, Measure.WALL)].count / named if named else 0.0,
            wall=totals[(model_id, Measure.WALL)],
            critical=totals[(model_id, Measure.CRITICAL)],
            streams={
                int(measure): totals[(model_id, measure)]
                for measure in STREAM_MEASURES
                if (model_id, measure) in totals
            },
        )
        for model_id in model_ids
        if model_id in served
    ]
    models.sort(key=lambda figures: (-figures.wall.count, figures.model.label))
    return StageLlmFigures(window=window, streams=streams, models=models)


@dataclass(frozen=True)
class ModelShareSeries:
    """Each model's share of the stage's samples per point (None where none named one)."""

    window: Window
    step: int
    starts: list[int]
    shares: list[tuple[ServedModel, list[float | None]]]
    counts: list[int]


def stage_model_shares(
    *,
    pipeline: Pipeline,
    stage: Stage,
    start: int,
    end: int,
    max_points: int = DEFAULT_MAX_POINTS,
    available: Mapping[int, float] | None = None,
) -> ModelShareSeries:
    """The share of the stage's requests served by each model over ``[start, end)``."""
    if available is None:
        available = resolution_availability(pipeline_id=pipeline.pk)
    plan = series_plan(available=available, start=start, end=end, max_points=max_points)
    rows = (
        LlmBucket.objects.filter(pipeline_id=pipeline.pk, stage_id=stage.pk, measure=Measure.WALL)
        .exclude(model_id=ALL_MODELS)
        .filter(tiles_filter(plan.claimed))
        .values_list("model_id", "resolution", bucket_start_seconds(), "count")
    )
    stored: dict[Tile, dict[int, int]] = defaultdict(dict)
    for model_id, resolution, bucket_start, count in rows:
        stored[Tile(resolution, bucket_start)][model_id] = count
    per_point: list[dict[int, int]] = []
    for _, tiles in plan.points:
        counts: dict[int, int] = defaultdict(int)
        for tile in tiles:
            for model_id, count in stored.get(tile, {}).items():
                counts[model_id] += count
        per_point.append(counts)
    served = ServedModel.objects.in_bulk({m for counts in per_point for m in counts})
    totals = [sum(counts.values()) for counts in per_point]
    order = sorted(served, key=lambda m: -sum(counts.get(m, 0) for counts in per_point))
    shares = [
        (
            served[model_id],
            [
                counts.get(model_id, 0) / total if total else None
                for counts, total in zip(per_point, totals, strict=True)
            ],
        )
        for model_id in order
    ]
    window = Window(plan.start, plan.end, plan.low, plan.high)
    return ModelShareSeries(
        window=window,
        step=plan.step,
        starts=[point for point, _ in plan.points],
        shares=shares,
        counts=totals,
    )
