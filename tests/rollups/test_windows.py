"""Window tiling: the coarsest stored buckets that cover a window, and fallbacks."""

import itertools
import math
from datetime import UTC, datetime, timedelta

import pytest
from django.core.exceptions import ValidationError
from hypothesis import given, settings
from hypothesis import strategies as st

from apps.core.time import RESOLUTIONS
from apps.rollups.models import E2E_STAGE_ID, Measure, RollupBucket
from apps.rollups.selectors.windows import (
    Tile,
    TileRun,
    requested_bounds,
    resolution_availability,
    tile_runs,
    tile_window,
    tiles_filter,
    window_tiles,
)
from tests.builders.bucket_rows import HandTrace, store_rollups
from tests.builders.configuration import make_pipeline
from tests.conftest import TeamWorld
from tests.timing import DAY_S as DAY
from tests.timing import HOUR_S as HOUR
from tests.timing import MINUTE_S as MINUTE
from tests.timing import MS

TEN = 10 * MINUTE


def at(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp())


def tiles(*specs: tuple[int, str]) -> set[Tile]:
    return {Tile(resolution, at(start)) for resolution, start in specs}


def test_whole_days_inside_then_hours_minutes_and_10s_at_the_ragged_edges() -> None:
    chosen = tile_window(start=at("2025-01-13 22:58:50"), end=at("2025-01-16 01:02:20"))
    assert set(chosen) == tiles(
        (10, "2025-01-13 22:58:50"),
        (MINUTE, "2025-01-13 22:59:00"),
        (HOUR, "2025-01-13 23:00:00"),
        (DAY, "2025-01-14 00:00:00"),
        (DAY, "2025-01-15 00:00:00"),
        (HOUR, "2025-01-16 00:00:00"),
        (MINUTE, "2025-01-16 01:00:00"),
        (MINUTE, "2025-01-16 01:01:00"),
        (10, "2025-01-16 01:02:00"),
        (10, "2025-01-16 01:02:10"),
    )
    assert len(chosen) == 10


def test_a_window_inside_one_minute_takes_10s_buckets() -> None:
    chosen = tile_window(start=at("2025-01-15 10:00:20"), end=at("2025-01-15 10:00:50"))
    assert set(chosen) == tiles(
        (10, "2025-01-15 10:00:20"), (10, "2025-01-15 10:00:30"), (10, "2025-01-15 10:00:40")
    )


def test_an_hour_aligned_window_takes_only_hours() -> None:
    chosen = tile_window(start=at("2025-01-15 09:00:00"), end=at("2025-01-15 12:00:00"))
    assert set(chosen) == tiles(
        (HOUR, "2025-01-15 09:00:00"), (HOUR, "2025-01-15 10:00:00"), (HOUR, "2025-01-15 11:00:00")
    )


def test_unaligned_bounds_are_refused() -> None:
    with pytest.raises(ValueError, match="multiples of 10 seconds"):
        tile_window(start=at("2025-01-15 09:00:05"), end=at("2025-01-15 10:00:00"))


def test_with_fewer_resolutions_the_finest_takes_the_buckets_the_edges_fall_in() -> None:
    runs = tile_runs(
        start=at("2025-01-15 10:00:25"), end=at("2025-01-15 10:03:05"), resolutions=(MINUTE, 10)
    )
    assert runs == [
        TileRun(10, at("2025-01-15 10:00:20"), at("2025-01-15 10:01:00")),
        TileRun(MINUTE, at("2025-01-15 10:01:00"), at("2025-01-15 10:03:00")),
        TileRun(10, at("2025-01-15 10:03:00"), at("2025-01-15 10:03:10")),
    ]


def test_a_window_inside_one_bucket_of_the_only_resolution_takes_that_bucket() -> None:
    runs = tile_runs(
        start=at("2025-01-15 10:20:00"), end=at("2025-01-15 10:40:00"), resolutions=(HOUR,)
    )
    assert runs == [TileRun(HOUR, at("2025-01-15 10:00:00"), at("2025-01-15 11:00:00"))]
    assert tile_runs(start=at("2025-01-15 10:20:00"), end=at("2025-01-15 10:20:00")) == []


@settings(max_examples=300, deadline=None)
@given(
    start=st.integers(min_value=0, max_value=10 * DAY // 10),
    length=st.integers(min_value=1, max_value=10 * DAY // 10),
)
def test_the_window_tiles_are_the_runs_of_every_resolution_bucket_by_bucket(
    start: int, length: int
) -> None:
    low = at("2025-01-01 00:00:00") + start * 10
    high = low + length * 10
    runs = tile_runs(start=low, end=high)
    assert [tile for run in runs for tile in run.tiles()] == tile_window(start=low, end=high)
    for previous, following in itertools.pairwise(runs):
        assert previous.end == following.start
        assert previous.resolution != following.resolution


@settings(max_examples=300, deadline=None)
@given(
    start=st.integers(min_value=0, max_value=10 * DAY // 10),
    length=st.integers(min_value=1, max_value=10 * DAY // 10),
)
def test_tiles_cover_the_window_exactly_with_the_coarsest_buckets(start: int, length: int) -> None:
    low = at("2025-01-01 00:00:00") + start * 10
    high = low + length * 10
    chosen = sorted(tile_window(start=low, end=high), key=lambda tile: tile.start)
    assert chosen[0].start == low
    assert chosen[-1].end == high
    for previous, following in itertools.pairwise(chosen):
        assert previous.end == following.start
    for tile in chosen:
        if tile.resolution == RESOLUTIONS[-1]:
            continue
        coarser = RESOLUTIONS[RESOLUTIONS.index(tile.resolution) + 1]
        holder = tile.start - tile.start % coarser
        # The next coarser bucket holding the tile does not fit inside the window.
        assert holder < low or holder + coarser > high


def test_a_missing_fine_edge_falls_back_to_the_coarser_bucket_holding_it() -> None:
    # 10-second buckets exist only from 12:00, minutes and ten minutes only from the 14th.
    available = {
        10: at("2025-01-16 12:00:00"),
        MINUTE: at("2025-01-14 00:00:00"),
        TEN: at("2025-01-14 00:00:00"),
        HOUR: 0,
    }
    chosen = tile_window(
        start=at("2025-01-13 22:58:50"), end=at("2025-01-16 01:02:20"), available_from=available
    )
    assert set(chosen) == tiles(
        (HOUR, "2025-01-13 22:00:00"),
        (HOUR, "2025-01-13 23:00:00"),
        (DAY, "2025-01-14 00:00:00"),
        (DAY, "2025-01-15 00:00:00"),
        (HOUR, "2025-01-16 00:00:00"),
        (MINUTE, "2025-01-16 01:00:00"),
        (MINUTE, "2025-01-16 01:01:00"),
        (MINUTE, "2025-01-16 01:02:00"),
    )


def test_the_recent_edge_keeps_its_10s_buckets_while_the_old_edge_widens() -> None:
    available = {
        10: at("2025-01-16 00:00:00"),
        MINUTE: at("2025-01-13 00:00:00"),
        TEN: at("2025-01-13 00:00:00"),
        HOUR: 0,
    }
    chosen = tile_window(
        start=at("2025-01-15 23:40:50"), end=at("2025-01-16 00:00:20"), available_from=available
    )
    assert set(chosen) == tiles(
        (MINUTE, "2025-01-15 23:40:00"),
        *((MINUTE, f"2025-01-15 23:{m}:00") for m in range(41, 50)),
        (TEN, "2025-01-15 23:50:00"),
        (10, "2025-01-16 00:00:00"),
        (10, "2025-01-16 00:00:10"),
    )


# --- From the stored rows ---------------------------------------------------------------------


def e2e_traces(*starts: int) -> list[HandTrace]:
    return [HandTrace(start=start, e2e_ns=100 * MS) for start in starts]


def test_availability_follows_the_oldest_stored_bucket_of_each_resolution(
    world: TeamWorld,
) -> None:
    pipeline = make_pipeline(world.team, "rag-chat")
    now = at("2025-01-16 12:00:00")
    starts = list(range(now - 4 * DAY, now, 10 * MINUTE))
    # As the pruning leaves them: 10 s for 2 hours, minutes and ten minutes for 3 days.
    kept = {10: now - 2 * HOUR, MINUTE: now - 3 * DAY, TEN: now - 3 * DAY, HOUR: 0, DAY: 0}
    store_rollups(pipeline, e2e_traces(*starts), keep=lambda r, start: start >= kept[r])
    available = resolution_availability(pipeline_id=pipeline.pk)
    # Hours and days start with the traffic: none of them is missing.
    assert available == {
        10: now - 2 * HOUR,
        MINUTE: now - 3 * DAY,
        TEN: now - 3 * DAY,
        HOUR: -math.inf,
        DAY: -math.inf,
    }

    window, chosen = window_tiles(pipeline_id=pipeline.pk, start=now - 3 * HOUR - 10, end=now - 30)
    assert window.start == now - 3 * HOUR - MINUTE
    assert window.end == now - 30
    assert (window.widened_before, window.widened_after) == (50, 0)
    assert set(chosen) == {
        Tile(MINUTE, now - 3 * HOUR - MINUTE),
        *(Tile(HOUR, now - h * HOUR) for h in (3, 2)),
        *(Tile(TEN, now - HOUR + t * TEN) for t in range(5)),
        *(Tile(MINUTE, now - TEN + m * MINUTE) for m in range(9)),
        *(Tile(10, now - MINUTE + s * 10) for s in range(3)),
    }


def test_a_young_pipeline_is_not_widened_to_before_its_first_trace(world: TeamWorld) -> None:
    pipeline = make_pipeline(world.team, "rag-chat")
    now = at("2025-01-16 12:00:00")
    store_rollups(pipeline, e2e_traces(*range(now - 30 * MINUTE + 7, now, 20)))
    window, chosen = window_tiles(pipeline_id=pipeline.pk, start=now - HOUR - 10, end=now)
    assert (window.widened_before, window.widened_after) == (0, 0)
    assert Tile(10, now - HOUR - 10) in chosen


def test_without_any_rows_nothing_is_widened(world: TeamWorld) -> None:
    pipeline = make_pipeline(world.team, "rag-chat")
    now = at("2025-01-16 12:00:00")
    window, chosen = window_tiles(pipeline_id=pipeline.pk, start=now - 15 * MINUTE - 10, end=now)
    assert (window.start, window.end) == (now - 15 * MINUTE - 10, now)
    assert Tile(10, now - 15 * MINUTE - 10) in chosen


def test_traffic_that_stopped_long_ago_does_not_widen_a_recent_window(world: TeamWorld) -> None:
    pipeline = make_pipeline(world.team, "rag-chat")
    now = at("2025-01-16 12:00:00")
    # Only hours and days are left of traffic ten days ago.
    store_rollups(pipeline, e2e_traces(now - 10 * DAY), resolutions=(HOUR, DAY))
    window, _ = window_tiles(pipeline_id=pipeline.pk, start=now - 15 * MINUTE - 10, end=now)
    assert (window.widened_before, window.widened_after) == (0, 0)


def test_the_filter_fetches_exactly_the_rows_of_the_tiles(world: TeamWorld) -> None:
    pipeline = make_pipeline(world.team, "rag-chat")
    low, high = at("2025-01-13 22:58:50"), at("2025-01-16 01:02:20")
    starts = list(range(low - HOUR, high + HOUR, 170))
    store_rollups(pipeline, e2e_traces(*starts))
    chosen = tile_window(start=low, end=high)
    rows = RollupBucket.objects.filter(pipeline_id=pipeline.pk).filter(tiles_filter(chosen))
    fetched = {
        Tile(r, int(s.timestamp())) for r, s in rows.values_list("resolution", "bucket_start")
    }
    assert fetched == {t for t in chosen if any(t.start <= s < t.end for s in starts)}
    e2e = rows.filter(stage_id=E2E_STAGE_ID, measure=Measure.WALL)
    assert sum(e2e.values_list("count", flat=True)) == sum(low <= s < high for s in starts)


# --- Requested windows ------------------------------------------------------------------------

NOW = datetime(2025, 1, 16, 12, 0, 7, tzinfo=UTC)


def test_a_named_window_ends_at_now_aligned_down_to_10s() -> None:
    assert requested_bounds(window="15m", now=NOW) == (
        at("2025-01-16 11:45:00"),
        at("2025-01-16 12:00:00"),
    )
    assert requested_bounds(now=NOW) == (at("2025-01-16 11:00:00"), at("2025-01-16 12:00:00"))


def test_explicit_bounds_are_aligned_down_and_to_defaults_to_now() -> None:
    start = NOW - timedelta(hours=2, seconds=3)
    assert requested_bounds(start=start, now=NOW) == (
        at("2025-01-16 10:00:00"),
        at("2025-01-16 12:00:00"),
    )


@pytest.mark.parametrize(
    ("arguments", "field", "message"),
    [
        ({"window": "2h"}, "window", "Use one of"),
        ({"window": "1h", "start": NOW - timedelta(hours=1)}, "window", "not both"),
        ({"end": NOW}, "from", "along with to"),
        ({"start": NOW, "end": NOW - timedelta(hours=1)}, "to", "after from"),
        ({"start": NOW, "end": NOW + timedelta(seconds=2)}, "to", "after from"),
        ({"start": NOW - timedelta(days=91), "end": NOW}, "to", "90 days"),
    ],
)
def test_bad_windows_name_the_parameter(arguments: dict, field: str, message: str) -> None:
    with pytest.raises(ValidationError) as caught:
        requested_bounds(now=NOW, **arguments)
    assert message in caught.value.message_dict[field][0]
