"""One percentile of one stage (or end to end) as a time series, for charts.

Points are ``step`` seconds apart, aligned to the epoch so that they stay put
between refreshes. The step is a multiple of the finest resolution kept over
the whole window, so each point is a whole number of stored buckets; it grows
until the series has no more points than asked for.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from django.db.models import Q

from apps.core.time import RESOLUTIONS
from apps.pipelines.models import Pipeline
from apps.rollups.models import RollupBucket
from apps.rollups.selectors.percentiles import ms
from apps.rollups.selectors.windows import (
    COARSEST,
    Tile,
    Window,
    align_down,
    align_up,
    bucket_start_seconds,
    resolution_availability,
    resolution_availability_many,
    tile_window,
    tiles_filter,
)
from apps.rollups.sketches.merge_batch import Blob, merged_groups

DEFAULT_MAX_POINTS = 120
# Steps a chart reads easily, tried in order when none is asked for.
NICE_STEPS = (
    10, 20, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200,
    86400, 2 * 86400, 7 * 86400,
)  # fmt: skip


@dataclass(frozen=True)
class Point:
    start: int
    value: float | None
    count: int


@dataclass(frozen=True)
class Series:
    window: Window
    step: int
    resolution: int
    points: list[Point]


def point_count(*, start: int, end: int, step: int) -> int:
    return (align_up(end, step) - align_down(start, step)) // step


def series_step(
    *, start: int, end: int, resolution: int, requested: int | None, max_points: int
) -> int:
    """The smallest usable step at least ``requested`` giving at most ``max_points`` points."""
    least = align_up(max(requested or resolution, resolution), resolution)
    candidates = [least] if requested else []
    candidates += [s for s in NICE_STEPS if s >= least and s % resolution == 0]
    for step in candidates:
        if point_count(start=start, end=end, step=step) <= max_points:
            return step
    step = max(least, align_up(-(-(end - start) // max_points), resolution))
    while point_count(start=start, end=end, step=step) > max_points:
        step += resolution
    return step


def _finest_kept(start: int, available_from: Mapping[int, float]) -> int:
    for resolution in RESOLUTIONS:
        if available_from.get(resolution, 0) <= start:
            return resolution
    return COARSEST


@dataclass(frozen=True)
class _Plan:
    """Which stored buckets make each point of one pipeline's series."""

    start: int
    end: int
    low: int
    high: int
    step: int
    resolution: int
    points: list[tuple[int, list[Tile]]]
    claimed: set[Tile]


def _plan(
    *,
    available: Mapping[int, float],
    start: int,
    end: int,
    step: int | None,
    max_points: int,
) -> _Plan:
    resolution = _finest_kept(start, available)
    low, high = align_down(start, resolution), align_up(end, resolution)
    step = series_step(
        start=low, end=high, resolution=resolution, requested=step, max_points=max_points
    )
    claimed: set[Tile] = set()
    point_tiles: list[tuple[int, list[Tile]]] = []
    for point in range(align_down(low, step), high, step):
        tiles = tile_window(
            start=max(point, low), end=min(point + step, high), available_from=available
        )
        # A fallback bucket shared by two points counts in the first only.
        tiles = [tile for tile in tiles if tile not in claimed]
        claimed.update(tiles)
        point_tiles.append((point, tiles))
    return _Plan(start, end, low, high, step, resolution, point_tiles, claimed)


def series_plan(*, available: Mapping[int, float], start: int, end: int, max_points: int) -> _Plan:
    """Which stored buckets make each point of a series over ``[start, end)``."""
    return _plan(available=available, start=start, end=end, step=None, max_points=max_points)


def _assemble(plan: _Plan, stored: dict[Tile, tuple[int, bytes]], quantile: float) -> Series:
    counts = [0] * len(plan.points)
    sketches: list[Blob] = []
    groups: list[int] = []
    found = stored.get
    for number, (_, tiles) in enumerate(plan.points):
        for tile in tiles:
            row = found(tile)
            if row is not None:
                counts[number] += row[0]
                sketches.append(row[1])
                groups.append(number)
    merged = merged_groups(blobs=sketches, groups=groups, group_count=len(plan.points))
    points = [
        Point(start=point, value=ms(sketch.quantile(quantile)) if count else None, count=count)
        for (point, _), count, sketch in zip(plan.points, counts, merged, strict=True)
    ]
    window = Window(
        requested_start=plan.start,
        requested_end=plan.end,
        start=min([plan.low, *(tile.start for tile in plan.claimed)]),
        end=max([plan.high, *(tile.end for tile in plan.claimed)]),
    )
    return Series(window=window, step=plan.step, resolution=plan.resolution, points=points)


def _stored(
    condition: Q, *, stage_id: int, measure: int
) -> dict[int, dict[Tile, tuple[int, bytes]]]:
    rows = RollupBucket.objects.filter(condition, stage_id=stage_id, measure=measure).values_list(
        "pipeline_id", "resolution", bucket_start_seconds(), "count", "sketch"
    )
    stored: dict[int, dict[Tile, tuple[int, bytes]]] = {}
    for pipeline_id, resolution, bucket_start, count, sketch in rows:
        if count:
            # A plain tuple is equal to the Tile of the same fields and hashes alike, and
            # a thousand of them are built in a fraction of the time.
            tile: Tile = (resolution, bucket_start)  # type: ignore[assignment]
            stored.setdefault(pipeline_id, {})[tile] = (count, sketch)
    return stored


def pipeline_series(
    *,
    pipeline: Pipeline,
    stage_id: int,
    measure: int,
    quantile: float,
    start: int,
    end: int,
    step: int | None = None,
    max_points: int = DEFAULT_MAX_POINTS,
    available: Mapping[int, float] | None = None,
) -> Series:
    """Points over ``[start, end)``, widened to whole buckets of the chosen resolution.

    ``available``: the pipeline's ``resolution_availability``, when the caller has it."""
    if available is None:
        available = resolution_availability(pipeline_id=pipeline.pk)
    plan = _plan(available=available, start=start, end=end, step=step, max_points=max_points)
    condition = Q(pipeline_id=pipeline.pk) & tiles_filter(plan.claimed)
    stored = _stored(condition, stage_id=stage_id, measure=measure)
    return _assemble(plan, stored.get(pipeline.pk, {}), quantile)


def pipelines_series(
    *,
    pipelines: Sequence[Pipeline],
    stage_id: int,
    measure: int,
    quantile: float,
    start: int,
    end: int,
    max_points: int = DEFAULT_MAX_POINTS,
) -> dict[int, Series]:
    """``pipeline_series`` of several pipelines in two statements, whatever their number."""
    if not pipelines:
        return {}
    available = resolution_availability_many(pipeline_ids=[p.pk for p in pipelines])
    plans = {
        p.pk: _plan(available=available[p.pk], start=start, end=end, step=None,
                    max_points=max_points)
        for p in pipelines
    }  # fmt: skip
    alike: dict[frozenset[Tile], list[int]] = {}
    for pipeline_id, plan in plans.items():
        alike.setdefault(frozenset(plan.claimed), []).append(pipeline_id)
    condition = Q()
    for claimed, ids in alike.items():
        condition |= Q(pipeline_id__in=ids) & tiles_filter(claimed)
    stored = _stored(condition, stage_id=stage_id, measure=measure)
    return {pid: _assemble(plan, stored.get(pid, {}), quantile) for pid, plan in plans.items()}
