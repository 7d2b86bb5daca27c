"""Percentiles of a pipeline, end to end and per stage, over a window of rollups.

Counts, errors, sums and maxima come from the rows' exact columns; percentiles
from the merged sketches (nearest rank, within 1 % of the exact value). A
stage's critical-path ``share`` is its total critical-path time over the total
end-to-end time, so the stages' shares plus the untracked share add up to 1.
"""

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Case, F, Q, QuerySet, When

from apps.core.percentiles import PERCENTILES, QUANTILES
from apps.core.sql_arrays import column_in
from apps.core.time import NS_PER_MS
from apps.pipelines.models import Pipeline, Stage
from apps.rollups.models import E2E_STAGE_ID, UNTRACKED_STAGE_ID, Measure, RollupBucket
from apps.rollups.selectors.windows import (
    Tile,
    Window,
    resolution_availability_many,
    tile_window,
    tiles_bounds,
    tiles_filter,
    window_tiles,
)
from apps.rollups.sketches.ddsketch import Sketch
from apps.rollups.sketches.merge_batch import Blob, merged_groups


def ms(value: float | None) -> float | None:
    """Milliseconds as the API shows them: to 0.1 ms."""
    return None if value is None else round(value, 1)


@dataclass
class Distribution:
    """One measure of one stage (or end to end) over the window."""

    count: int = 0
    errors: int = 0
    sum_ns: int = 0
    max_ns: int = 0
    sketch: Sketch = field(default_factory=Sketch)

    def percentiles(self) -> dict[str, float | None]:
        if not self.count:
            return dict.fromkeys(PERCENTILES)
        values = self.sketch.quantiles([QUANTILES[p] for p in PERCENTILES])
        return {p: ms(v) for p, v in zip(PERCENTILES, values, strict=True)}

    def percentile(self, name: str) -> float | None:
        return ms(self.sketch.quantile(QUANTILES[name])) if self.count else None

    @property
    def max_ms(self) -> float | None:
        return ms(self.max_ns / NS_PER_MS) if self.count else None

    @property
    def mean_ms(self) -> float | None:
        return ms(self.sum_ns / self.count / NS_PER_MS) if self.count else None


def budget_status(*, percentiles: dict[str, float | None], budget: dict[str, int]) -> str:
    """``no_data`` without samples, ``over`` when a budgeted percentile is above its budget."""
    if all(value is None for value in percentiles.values()):
        return "no_data"
    over = any((percentiles.get(p) or 0) > limit for p, limit in budget.items())
    return "over" if over else "ok"


@dataclass(frozen=True)
class StagePercentiles:
    stage: Stage
    wall: Distribution
    critical: Distribution
    percentiles: dict[str, float | None]
    status: str
    share: float | None
    ordinal: int  # among the pipeline's stages in their order, read or not


@dataclass(frozen=True)
class PipelinePercentiles:
    pipeline: Pipeline
    window: Window
    e2e: Distribution
    e2e_percentiles: dict[str, float | None]
    e2e_status: str
    stages: list[StagePercentiles]
    untracked: Distribution
    untracked_share: float | None


def _totals(rows: Iterable[tuple[Any, ...]]) -> dict[tuple[int, int, int], Distribution]:
    """Rows summed per (pipeline id, stage id, measure), their sketches merged in one pass."""
    totals: dict[tuple[int, int, int], Distribution] = defaultdict(Distribution)
    sketches: list[Blob] = []
    groups: list[int] = []
    scopes: dict[tuple[int, int, int], int] = {}
    for pipeline_id, stage_id, measure, count, errors, sum_ns, max_ns, blob in rows:
        if not count:
            continue
        scope = (pipeline_id, stage_id, measure)
        total = totals[scope]
        total.count += count
        total.errors += errors
        total.sum_ns += sum_ns
        total.max_ns = max(total.max_ns, max_ns)
        # Untracked time shows only its share and mean; a row read without its sketch
        # counts in the totals alone.
        if stage_id != UNTRACKED_STAGE_ID and blob is not None:
            sketches.append(blob)
            groups.append(scopes.setdefault(scope, len(scopes)))
    merged = merged_groups(blobs=sketches, groups=groups, group_count=len(scopes))
    for scope, sketch in zip(scopes, merged, strict=True):
        totals[scope].sketch = sketch
    return totals


ROW_FIELDS = (
    "pipeline_id", "stage_id", "measure", "count", "error_count", "sum_ns", "max_ns", "sketch",
)  # fmt: skip


def _share(part: Distribution, whole: Distribution) -> float | None:
    return round(part.sum_ns / whole.sum_ns, 6) if whole.sum_ns else None


def _assemble(
    pipeline: Pipeline,
    window: Window,
    totals: dict[tuple[int, int, int], Distribution],
    stages: Iterable[Stage],
    only: int | None = None,
) -> PipelinePercentiles:
    def of(stage_id: int, measure: int) -> Distribution:
        return totals.get((pipeline.pk, stage_id, measure)) or Distribution()

    e2e = of(E2E_STAGE_ID, Measure.WALL)
    results = []
    for ordinal, stage in enumerate(stages):
        if only is not None and stage.pk != only:
            continue
        wall, critical = of(stage.pk, Measure.WALL), of(stage.pk, Measure.CRITICAL)
        percentiles = wall.percentiles()
        results.append(
            StagePercentiles(
                stage=stage,
                wall=wall,
                critical=critical,
                percentiles=percentiles,
                status=budget_status(percentiles=percentiles, budget=stage.budget),
                share=_share(critical, e2e),
                ordinal=ordinal,
            )
        )
    untracked = of(UNTRACKED_STAGE_ID, Measure.CRITICAL)
    e2e_percentiles = e2e.percentiles()
    return PipelinePercentiles(
        pipeline=pipeline,
        window=window,
        e2e=e2e,
        e2e_percentiles=e2e_percentiles,
        e2e_status=budget_status(percentiles=e2e_percentiles, budget=pipeline.budget),
        stages=results,
        untracked=untracked,
        untracked_share=_share(untracked, e2e),
    )


def _read_totals(
    rows: QuerySet[RollupBucket], *, critical_sketches: bool
) -> dict[tuple[int, int, int], Distribution]:
    if critical_sketches:
        return _totals(rows.values_list(*ROW_FIELDS))
    # One statement for both measures, the critical path's sketches left in the
    # database: a second statement filtered on the measure made PostgreSQL pick a
    # worse index once other pipelines' rows filled the table (10 ms instead of 0.3).
    wall_sketch = Case(When(measure=Measure.WALL, then=F("sketch")), default=None)
    return _totals(rows.values_list(*ROW_FIELDS[:-1], wall_sketch))


def pipeline_percentiles(
    *,
    pipeline: Pipeline,
    start: int,
    end: int,
    critical_sketches: bool = True,
    stage: Stage | None = None,
    available: Mapping[int, float] | None = None,
) -> PipelinePercentiles:
    """Percentiles over ``[start, end)`` (epoch seconds, 10-second aligned).

    ``critical_sketches`` as in ``pipelines_percentiles``. With ``stage``, only that
    stage is read and listed, beside the end-to-end and untracked figures (a stage's
    share needs the end-to-end total): a page about one stage decodes two series of
    sketches instead of one per stage. ``available``: the pipeline's
    ``resolution_availability``, when a page that reads several figures has it."""
    window, tiles = window_tiles(pipeline_id=pipeline.pk, start=start, end=end, available=available)
    rows = RollupBucket.objects.filter(pipeline_id=pipeline.pk).filter(tiles_filter(tiles))
    if stage is not None:
        rows = rows.filter(stage_id__in=[stage.pk, E2E_STAGE_ID, UNTRACKED_STAGE_ID])
    stages = Stage.objects.filter(pipeline=pipeline).order_by("position", "id")
    totals = _read_totals(rows, critical_sketches=critical_sketches)
    return _assemble(pipeline, window, totals, stages, only=None if stage is None else stage.pk)


def pipelines_percentiles(
    *,
    pipelines: Sequence[Pipeline],
    start: int,
    end: int,
    critical_sketches: bool = True,
    stages: Sequence[Stage] | None = None,
) -> dict[int, PipelinePercentiles]:
    """``pipeline_percentiles`` of several pipelines in a few statements, whatever their
    number: availability, rows (pipelines tiled alike share one condition), stages.

    Without ``critical_sketches`` the critical-path rows come without their sketches,
    which never leave the database: shares and means stay exact, its percentiles are
    left out (an overview shows none), and half the sketches are not decoded.

    ``stages``: only these stages of the pipelines are read and listed (beside the
    end-to-end and untracked figures), for a reader that bounds how many it shows;
    None reads every stage."""
    if not pipelines:
        return {}
    available = resolution_availability_many(pipeline_ids=[p.pk for p in pipelines])
    windows: dict[int, Window] = {}
    alike: dict[tuple[Tile, ...], list[int]] = defaultdict(list)
    for pipeline in pipelines:
        tiles = tile_window(start=start, end=end, available_from=available[pipeline.pk])
        low, high = tiles_bounds(tiles)
        windows[pipeline.pk] = Window(start, end, low, high)
        alike[tuple(tiles)].append(pipeline.pk)
    condition = Q()
    for shared, ids in alike.items():
        condition |= Q(pipeline_id__in=ids) & tiles_filter(shared)
    rows = RollupBucket.objects.filter(condition)
    if stages is None:
        stages = list(Stage.objects.filter(pipeline__in=pipelines).order_by("position", "id"))
    else:
        chosen = [stage.pk for stage in stages]
        rows = rows.filter(
            column_in(RollupBucket, "stage_id", [*chosen, E2E_STAGE_ID, UNTRACKED_STAGE_ID])
        )
    totals = _read_totals(rows, critical_sketches=critical_sketches)
    by_pipeline: dict[int, list[Stage]] = defaultdict(list)
    for stage in stages:
        by_pipeline[stage.pipeline_id].append(stage)
    return {p.pk: _assemble(p, windows[p.pk], totals, by_pipeline.get(p.pk, [])) for p in pipelines}
