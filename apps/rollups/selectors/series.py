"""One percentile of one stage (or end to end) as a time series, for charts.

Points are ``step`` seconds apart, aligned to the epoch so that they stay put
between refreshes. The step is a multiple of the finest resolution kept over
the whole window, so each point is a whole number of stored buckets; it grows
until the series has no more points than asked for.
"""

from dataclasses import dataclass

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
    start_seconds,
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


def _finest_kept(start: int, available_from: dict[int, float]) -> int:
    for resolution in RESOLUTIONS:
        if available_from.get(resolution, 0) <= start:
            return resolution
    return COARSEST


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
) -> Series:
    """Points over ``[start, end)``, widened to whole buckets of the chosen resolution."""
    available = resolution_availability(pipeline_id=pipeline.pk)
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
    rows = (
        RollupBucket.objects.filter(pipeline_id=pipeline.pk, stage_id=stage_id, measure=measure)
        .filter(tiles_filter(claimed))
        .values_list("resolution", bucket_start_seconds(), "count", "sketch")
    )
    stored = {
        Tile(resolution, start_seconds(bucket_start)): (count, sketch)
        for resolution, bucket_start, count, sketch in rows
        if count
    }
    counts = [0] * len(point_tiles)
    sketches: list[Blob] = []
    groups: list[int] = []
    for number, (_, tiles) in enumerate(point_tiles):
        for tile in tiles:
            if tile in stored:
                count, sketch = stored[tile]
                counts[number] += count
                sketches.append(sketch)
                groups.append(number)
    merged = merged_groups(blobs=sketches, groups=groups, group_count=len(point_tiles))
    points = [
        Point(start=point, value=ms(sketch.quantile(quantile)) if count else None, count=count)
        for (point, _), count, sketch in zip(point_tiles, counts, merged, strict=True)
    ]
    window = Window(
        requested_start=start,
        requested_end=end,
        start=min([low, *(tile.start for tile in claimed)]),
        end=max([high, *(tile.end for tile in claimed)]),
    )
    return Series(window=window, step=step, resolution=resolution, points=points)
