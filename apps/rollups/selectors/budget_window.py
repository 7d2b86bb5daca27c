"""What a budget evaluation reads: its scopes, its window, the window's sketches and examples.

Every evaluation of a pipeline, the regular tick or a prompt check between ticks,
looks at each budget (each end-to-end percentile, each stage's percentile of wall
time) over the sliding window ``evaluation_window_s`` ending with the 10 s bucket
that holds ``now``. Both kinds of evaluation in one tick period see the same window.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import F, Q

from apps.analysis.models import StageSample
from apps.core.time import FINEST_RESOLUTION, NS_PER_S, align_down, to_datetime
from apps.ingest.models import Trace
from apps.pipelines.models import Pipeline, Stage
from apps.pipelines.stream_budget import MAX_CHUNK_GAP, TIME_PER_OUTPUT_TOKEN
from apps.rollups.models import ALL_MODELS, E2E_STAGE_ID, LlmBucket, Measure, RollupBucket
from apps.rollups.selectors.fit import DURATION_NS, TraceSet
from apps.rollups.selectors.windows import tile_runs
from apps.rollups.sketches.ddsketch import Sketch
from apps.rollups.sketches.merge_batch import Blob, merged_groups

EVALUATION_INTERVAL_S = 10
BUCKET_S = FINEST_RESOLUTION
WINDOW_RESOLUTIONS = (60, BUCKET_S)
EXAMPLES = 5


@dataclass(frozen=True)
class Scope:
    """One budget to check: the end-to-end time (``stage`` None), a stage's wall time, or
    a streaming measure of a stage's answers (its stream budget)."""

    stage: Stage | None
    percentile: str
    budget_ms: int
    measure: int = Measure.WALL

    @property
    def stage_id(self) -> int:
        return self.stage.pk if self.stage is not None else E2E_STAGE_ID

    @property
    def key(self) -> tuple[int | None, int, str]:
        return (self.stage.pk if self.stage is not None else None, self.measure, self.percentile)


@dataclass(frozen=True)
class EvaluationWindow:
    """Buckets starting in [start, end): the evaluation window, whole 10 s buckets."""

    start: datetime
    end: datetime

    @property
    def start_ns(self) -> int:
        return int(self.start.timestamp()) * NS_PER_S

    @property
    def end_ns(self) -> int:
        return int(self.end.timestamp()) * NS_PER_S


def evaluation_tick(now: datetime) -> datetime:
    """The start of the 10 s evaluation period holding ``now``: one evaluation per tick."""
    return to_datetime(align_down(int(now.timestamp()), EVALUATION_INTERVAL_S))


def evaluation_window(*, now: datetime, window_s: int) -> EvaluationWindow:
    end = evaluation_tick(now) + timedelta(seconds=BUCKET_S)
    return EvaluationWindow(start=end - timedelta(seconds=window_s), end=end)


STREAM_BUDGET_MEASURES = {
    TIME_PER_OUTPUT_TOKEN: Measure.TIME_PER_OUTPUT_TOKEN,
    MAX_CHUNK_GAP: Measure.MAX_CHUNK_GAP,
}


def pipeline_scopes(pipeline: Pipeline, stages: Iterable[Stage]) -> list[Scope]:
    scopes = [Scope(None, percentile, ms) for percentile, ms in pipeline.budget.items()]
    for stage in stages:
        if stage.budget_ms is not None:
            scopes.append(Scope(stage, stage.budget_percentile, stage.budget_ms))
        scopes += [
            Scope(stage, percentile, ms, STREAM_BUDGET_MEASURES[key])
            for key, percentile, ms in stage.stream_budgets
        ]
    return scopes


def _window_tiles(window: EvaluationWindow) -> Q:
    # Whole minutes inside the window come from minute buckets (written in the same
    # rollup pass as their 10 s children): a third of the sketches to decode.
    tiles = Q()
    for resolution, low, high in tile_runs(
        start=int(window.start.timestamp()),
        end=int(window.end.timestamp()),
        resolutions=WINDOW_RESOLUTIONS,
    ):
        tiles |= Q(
            resolution=resolution,
            bucket_start__gte=to_datetime(low),
            bucket_start__lt=to_datetime(high),
        )
    return tiles


def _merged_by(rows: Iterable[tuple[Any, Blob]]) -> dict[Any, Sketch]:
    # Decoded and merged per key in one batch: ~210 sketches for a pipeline of 20
    # stages, which one by one were most of an evaluation's time.
    blobs: list[Blob] = []
    groups: list[int] = []
    found: dict[Any, int] = {}
    for key, blob in rows:
        blobs.append(blob)
        groups.append(found.setdefault(key, len(found)))
    merged = merged_groups(blobs=blobs, groups=groups, group_count=len(found))
    return dict(zip(found, merged, strict=True))


def stream_sketches(
    *, pipeline_id: int, stage_ids: Iterable[int], window: EvaluationWindow
) -> dict[tuple[int, int], Sketch]:
    """Streaming sketches of every model together by (stage id, measure), merged over the
    window."""
    stage_ids = list(stage_ids)
    if not stage_ids:
        return {}
    rows = LlmBucket.objects.filter(
        _window_tiles(window),
        pipeline_id=pipeline_id,
        stage_id__in=stage_ids,
        model_id=ALL_MODELS,
        measure__in=list(STREAM_BUDGET_MEASURES.values()),
    ).values_list("stage_id", "measure", "sketch")
    return _merged_by(((stage_id, measure), blob) for stage_id, measure, blob in rows)


def window_sketches(
    *, pipeline_id: int, stage_ids: Iterable[int], window: EvaluationWindow
) -> dict[int, Sketch]:
    """Wall-time sketches by stage id (E2E_STAGE_ID for end to end), merged over the window."""
    rows = RollupBucket.objects.filter(
        _window_tiles(window),
        pipeline_id=pipeline_id,
        stage_id__in=list(stage_ids),
        measure=Measure.WALL,
    ).values_list("stage_id", "sketch")
    return _merged_by(rows)


def slowest_trace_ids(*, pipeline: Pipeline, scope: Scope, window: EvaluationWindow) -> list[str]:
    """Hex ids of the slowest traces of the window for a scope, slowest first."""
    if scope.stage is None:
        ids = (
            TraceSet(pipeline, window.start_ns, window.end_ns)
            .queryset()
            .annotate(elapsed_ns=DURATION_NS)
            .order_by("-elapsed_ns", "pk")
            .values_list("trace_id", flat=True)[:EXAMPLES]
        )
        return [bytes(trace_id).hex() for trace_id in ids]
    samples = StageSample.objects.filter(
        pipeline_id=pipeline.pk,
        stage_id=scope.stage.pk,
        start_ns__gte=window.start_ns,
        start_ns__lt=window.end_ns,
    )
    # The worst answers of a stream budget's measure, else the stage's slowest.
    if scope.measure == Measure.MAX_CHUNK_GAP:
        samples = samples.filter(max_gap_ns__isnull=False).order_by("-max_gap_ns", "trace_pk")
    elif scope.measure == Measure.TIME_PER_OUTPUT_TOKEN:
        samples = (
            samples.filter(output_tokens__gt=1, generation_ns__isnull=False)
            .annotate(per_token=F("generation_ns") / (F("output_tokens") - 1))
            .order_by("-per_token", "trace_pk")
        )
    else:
        samples = samples.order_by("-wall_ns", "trace_pk")
    trace_pks = list(samples.values_list("trace_pk", flat=True)[:EXAMPLES])
    hex_ids = {
        pk: bytes(trace_id).hex()
        for pk, trace_id in Trace.objects.filter(pk__in=trace_pks).values_list("pk", "trace_id")
    }
    return [hex_ids[pk] for pk in trace_pks if pk in hex_ids]
