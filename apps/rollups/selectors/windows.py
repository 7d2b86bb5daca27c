"""Which rollup buckets answer a time window.

Times here are whole seconds since the Unix epoch (UTC); buckets of every
resolution start at multiples of their width, and each width divides the next,
so two buckets either nest or do not overlap.

A window ``[start, end)`` is tiled greedily: whole days inside it, then whole
hours at its edges, then minutes, then 10-second buckets. Fine buckets are kept
for a short time only, so for each resolution ``available_from`` says from when
its buckets exist; a tile older than that is replaced by the coarser bucket
holding it, which widens the window (the effective bounds are reported).
Budget evaluation and objectives tile the same way (``tile_runs``), over the
resolutions they choose to read.
"""

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import NamedTuple

from django.core.exceptions import ValidationError
from django.db import connection
from django.db.models import BigIntegerField, Q
from django.db.models.expressions import Combinable
from django.db.models.functions import Cast, Extract

from apps.core.sql_arrays import array_literal
from apps.core.time import (
    FINEST_RESOLUTION,
    RESOLUTIONS,
    align_down,
    align_up,
    to_datetime,
    to_seconds,
)
from apps.core.windows import named_windows
from apps.rollups.models import RollupBucket

COARSEST = RESOLUTIONS[-1]
COARSEST_FIRST = RESOLUTIONS[::-1]


class Tile(NamedTuple):
    """A stored bucket: a tuple, as tiles are hashed by the thousand per request."""

    resolution: int
    start: int

    @property
    def end(self) -> int:
        return self.start + self.resolution


class TileRun(NamedTuple):
    """Consecutive buckets of one resolution covering ``[start, end)``."""

    resolution: int
    start: int
    end: int

    def tiles(self) -> list[Tile]:
        return [Tile(self.resolution, s) for s in range(self.start, self.end, self.resolution)]


def tile_runs(
    *, start: int, end: int, resolutions: tuple[int, ...] = COARSEST_FIRST
) -> list[TileRun]:
    """The coarsest buckets covering ``[start, end)``, as runs in time order.

    ``resolutions`` are the widths that may be read, coarsest first. Coarse
    buckets take what lies inside the window and finer ones fill its edges; the
    finest takes the buckets the edges fall in, so the runs cover ``[start, end)``
    exactly when both are multiples of it, and otherwise the whole bucket each
    edge reaches into.
    """
    if start >= end:
        return []
    resolution, finer = resolutions[0], resolutions[1:]
    if not finer:
        return [TileRun(resolution, align_down(start, resolution), align_up(end, resolution))]
    low, high = align_up(start, resolution), align_down(end, resolution)
    if low >= high:
        return tile_runs(start=start, end=end, resolutions=finer)
    return [
        *tile_runs(start=start, end=low, resolutions=finer),
        TileRun(resolution, low, high),
        *tile_runs(start=high, end=end, resolutions=finer),
    ]


def _stored(tile: Tile, available_from: Mapping[int, float]) -> Tile:
    """The tile itself, or the coarser bucket holding it when its resolution is not kept."""
    level = RESOLUTIONS.index(tile.resolution)
    while tile.resolution != COARSEST and tile.start < available_from.get(tile.resolution, 0):
        level += 1
        coarser = RESOLUTIONS[level]
        tile = Tile(coarser, align_down(tile.start, coarser))
    return tile


def tile_window(
    *, start: int, end: int, available_from: Mapping[int, float] | None = None
) -> list[Tile]:
    """Disjoint buckets covering ``[start, end)`` (10-second aligned), in time order.

    Without ``available_from`` every resolution counts as kept; the union of the
    tiles is ``[start, end)`` exactly, otherwise an interval holding it.
    """
    if start % FINEST_RESOLUTION or end % FINEST_RESOLUTION:
        raise ValueError("window bounds must be multiples of 10 seconds")
    ideal = [tile for run in tile_runs(start=start, end=end) for tile in run.tiles()]
    if not available_from:
        return ideal
    stored = [_stored(tile, available_from) for tile in ideal]
    if stored == ideal:
        return ideal
    chosen = set(stored)
    # A fallback bucket may hold other chosen tiles: keep only the outermost.
    kept = [
        tile
        for tile in chosen
        if not any(
            Tile(coarser, align_down(tile.start, coarser)) in chosen
            for coarser in RESOLUTIONS
            if coarser > tile.resolution
        )
    ]
    return sorted(kept, key=lambda tile: tile.start)


def tiles_bounds(tiles: list[Tile]) -> tuple[int, int]:
    """The interval covered by tiles in time order."""
    return tiles[0].start, tiles[-1].end


def tiles_filter(tiles: Iterable[Tile]) -> Q:
    """One condition selecting the tiles' rows: an OR of per-resolution start ranges."""
    starts: dict[int, list[int]] = defaultdict(list)
    for tile in tiles:
        starts[tile.resolution].append(tile.start)
    condition = Q(pk__in=[])
    for resolution, values in sorted(starts.items()):
        values.sort()
        run_start = previous = values[0]
        for value in [*values[1:], None]:
            if value is not None and value == previous + resolution:
                previous = value
                continue
            condition |= Q(
                resolution=resolution,
                bucket_start__gte=to_datetime(run_start),
                bucket_start__lte=to_datetime(previous),
            )
            if value is not None:
                run_start = previous = value
    return condition


def resolution_availability(*, pipeline_id: int) -> dict[int, float]:
    """From when each resolution's buckets exist for the pipeline (epoch seconds).

    Fine buckets are missing before a resolution's first bucket only when a
    coarser resolution holds data from before it: they were pruned. Where the
    coarser data starts with the fine data, the pipeline is simply that young.
    A resolution with no bucket at all is missing until the last coarser data;
    with no data at all nothing is missing and no window is widened.
    """
    return _availability(_resolution_bounds(pipeline_id))


def resolution_availability_many(*, pipeline_ids: Sequence[int]) -> dict[int, dict[int, float]]:
    """``resolution_availability`` of several pipelines, in one statement."""
    if not pipeline_ids:
        return {}
    table = RollupBucket._meta.db_table
    one = (
        f"(SELECT bucket_start FROM {table} b WHERE b.pipeline_id = p.id AND b.resolution = "
        "{resolution} ORDER BY bucket_start {order} LIMIT 1)"
    )
    columns = ", ".join(
        one.format(resolution=int(r), order=order) for r in RESOLUTIONS for order in ("ASC", "DESC")
    )
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT p.id, {columns} FROM unnest(%s::bigint[]) AS p(id)",
            [array_literal(pipeline_ids)],
        )
        rows = cursor.fetchall()
    result = {}
    for pipeline_id, *found in rows:
        values = [_as_seconds(value) for value in found]
        bounds = {r: (values[2 * i], values[2 * i + 1]) for i, r in enumerate(RESOLUTIONS)}
        result[pipeline_id] = _availability(bounds)
    return result


def _availability(bounds: dict[int, tuple[int | None, int | None]]) -> dict[int, float]:
    available: dict[int, float] = dict.fromkeys(RESOLUTIONS, -math.inf)
    for level, resolution in enumerate(RESOLUTIONS[:-1]):
        coarser = [
            (c, c_first, c_last)
            for c in RESOLUTIONS[level + 1 :]
            if (c_first := bounds[c][0]) is not None and (c_last := bounds[c][1]) is not None
        ]
        first = bounds[resolution][0]
        if not coarser:
            continue
        if first is None:
            available[resolution] = max(c_last + c for c, _, c_last in coarser)
        elif any(c_first < align_down(first, c) for c, c_first, _ in coarser):
            available[resolution] = first
    return available


def _bounds_sql() -> str:
    table = RollupBucket._meta.db_table
    one = (
        f"(SELECT bucket_start FROM {table} WHERE pipeline_id = %s AND resolution = %s "
        "ORDER BY bucket_start {order} LIMIT 1)"
    )
    return "SELECT " + ", ".join(
        one.format(order=order) for _ in RESOLUTIONS for order in ("ASC", "DESC")
    )


def _as_seconds(value: datetime | None) -> int | None:
    if value is None:
        return None
    return to_seconds(value if value.tzinfo else value.replace(tzinfo=UTC))


def _resolution_bounds(pipeline_id: int) -> dict[int, tuple[int | None, int | None]]:
    """First and last bucket start per resolution: eight index lookups in one query.

    Written as SQL because building the same statement through the ORM costs more
    than running it, on every request.
    """
    params = [value for r in RESOLUTIONS for value in (pipeline_id, r, pipeline_id, r)]
    with connection.cursor() as cursor:
        cursor.execute(_bounds_sql(), params)
        values = [_as_seconds(value) for value in cursor.fetchone()]
    return {r: (values[2 * i], values[2 * i + 1]) for i, r in enumerate(RESOLUTIONS)}


# Named windows back from now, as the API and the dashboard offer them.
WINDOWS = named_windows("15m", "1h", "6h", "24h", "7d", "30d")
DEFAULT_WINDOW = "1h"
MAX_WINDOW_SECONDS = 90 * 86400


@dataclass(frozen=True)
class Window:
    """The window asked for and the one the answer covers, in epoch seconds."""

    requested_start: int
    requested_end: int
    start: int
    end: int

    @property
    def widened_before(self) -> int:
        return self.requested_start - self.start

    @property
    def widened_after(self) -> int:
        return self.end - self.requested_end


def requested_bounds(
    *,
    window: str | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
    now: datetime | None = None,
) -> tuple[int, int]:
    """``[start, end)`` in epoch seconds aligned down to 10 s, from a named window or bounds.

    Raises ValidationError naming the parameter (``window``, ``from`` or ``to``).
    """
    now_seconds = to_seconds(now or datetime.now(tz=UTC))
    if window is not None and (start is not None or end is not None):
        raise ValidationError({"window": ["Give either window or from/to, not both."]})
    if start is None:
        if end is not None:
            raise ValidationError({"from": ["Give from along with to."]})
        name = window or DEFAULT_WINDOW
        if name not in WINDOWS:
            raise ValidationError({"window": [f"Use one of {', '.join(WINDOWS)}."]})
        high = align_down(now_seconds, FINEST_RESOLUTION)
        return high - WINDOWS[name].seconds, high
    low = align_down(to_seconds(start), FINEST_RESOLUTION)
    high = align_down(now_seconds if end is None else to_seconds(end), FINEST_RESOLUTION)
    if low >= high:
        raise ValidationError(
            {"to": ["Must be at least 10 seconds after from (both are aligned down to 10 s)."]}
        )
    if high - low > MAX_WINDOW_SECONDS:
        raise ValidationError({"to": ["The window may be at most 90 days long."]})
    return low, high


def window_tiles(
    *, pipeline_id: int, start: int, end: int, available: Mapping[int, float] | None = None
) -> tuple[Window, list[Tile]]:
    """The stored buckets answering ``[start, end)`` for a pipeline, and the window they cover.

    ``available`` is the pipeline's ``resolution_availability``, when the caller has it."""
    if available is None:
        available = resolution_availability(pipeline_id=pipeline_id)
    tiles = tile_window(start=start, end=end, available_from=available)
    low, high = tiles_bounds(tiles)
    return Window(start, end, low, high), tiles


def bucket_start_seconds() -> Combinable | str:
    """``bucket_start`` as epoch seconds, computed by PostgreSQL.

    Loading thousands of timestamps costs more in Python than the rest of a series.
    """
    return Cast(Extract("bucket_start", "epoch", tzinfo=UTC), BigIntegerField())
