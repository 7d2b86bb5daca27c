"""What a budget evaluation reads: its scopes, its window, the window's sketches and examples.

Every evaluation of a pipeline, the regular tick or a prompt check between ticks,
looks at each budget (each end-to-end percentile, each stage's percentile of wall
time) over the sliding window ``evaluation_window_s`` ending with the 10 s bucket
that holds ``now``. Both kinds of evaluation in one tick period see the same window.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Q

from apps.analysis.models import StageSample
from apps.core.time import FINEST_RESOLUTION, NS_PER_S, align_down, to_datetime
from apps.ingest.models import Trace
from apps.pipelines.models import Pipeline, Stage
from apps.rollups.models import E2E_STAGE_ID, Measure, RollupBucket
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
    """One budget to check: the end-to-end time (``stage`` None) or a stage's wall time."""

    stage: Stage | None
    percentile: str
    budget_ms: int

    @property
    def stage_id(self) -> int:
        return self.stage.pk if self.stage is not None else E2E_STAGE_ID

    @property
    def key(self) -> tuple[int | None, str]:
        return (self.stage.pk if self.stage is not None else None, self.percentile)


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


def pipeline_scopes(pipeline: Pipeline, stages: Iterable[Stage]) -> list[Scope]:
    scopes = [Scope(None, percentile, ms) for percentile, ms in pipeline.budget.items()]
    scopes += [
        Scope(stage, stage.budget_percentile, stage.budget_ms)
        for stage in stages
        if stage.budget_ms is not None
    ]
    return scopes


def window_sketches(
    *, pipeline_id: int, stage_ids: Iterable[int], window: EvaluationWindow
) -> dict[int, Sketch]:
    """Wall-time sketches by stage id (E2E_STAGE_ID for end to end), merged over the window."""
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
    rows = RollupBucket.objects.filter(
        tiles, pipeline_id=pipeline_id, stage_id__in=list(stage_ids), measure=Measure.WALL
    ).values_list("stage_id", "sketch")
    # Decoded and merged per stage in one batch: ~210 sketches for a pipeline of 20
    # stages, which one by one were most of an evaluation's time.
    blobs: list[Blob] = []
    groups: list[int] = []
    found: dict[int, int] = {}
    for stage_id, blob in rows:
        blobs.append(blob)
        groups.append(found.setdefault(stage_id, len(found)))
    merged = merged_groups(blobs=blobs, groups=groups, group_count=len(found))
    return dict(zip(found, merged, strict=True))


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
    trace_pks = list(
        StageSample.objects.filter(
            pipeline_id=pipeline.pk,
            stage_id=scope.stage.pk,
            start_ns__gte=window.start_ns,
            start_ns__lt=window.end_ns,
        )
        .order_by("-wall_ns", "trace_pk")
        .values_list("trace_pk", flat=True)[:EXAMPLES]
    )
    hex_ids = {
        pk: bytes(trace_id).hex()
        for pk, trace_id in Trace.objects.filter(pk__in=trace_pks).values_list("pk", "trace_id")
    }
    return [hex_ids[pk] for pk in trace_pks if pk in hex_ids]
