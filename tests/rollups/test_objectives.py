"""Objectives: error budget over 30 days and burn rates, from good/total counts of e2e rollups."""

from datetime import timedelta
from decimal import Decimal
from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pytest_django import Settings

from apps.pipelines.models import Pipeline
from apps.rollups.selectors.objectives import (
    OLDER_RESOLUTIONS,
    RECENT_RESOLUTIONS,
    pipeline_objective_status,
)
from apps.rollups.selectors.windows import tile_runs
from tests.builders.configuration import make_pipeline
from tests.builders.evaluation_rollups import T0, put_bucket, put_requests
from tests.conftest import TeamWorld

NOW = T0 + timedelta(days=40, hours=12, seconds=5)


def burst(pipeline: Pipeline, ago: timedelta, *, total: int, good: int) -> None:
    """Traffic in one 10 s bucket, written at every resolution as the rollups keep it."""
    put_requests(pipeline, NOW - ago, total=total, good=good)


@pytest.fixture
def pipeline(world: TeamWorld) -> Pipeline:
    return make_pipeline(
        world.team, "rag-chat", objective_target=Decimal("99"), objective_threshold_ms=2000
    )


def test_error_budget_and_burn_rates_on_known_traffic(pipeline: Pipeline) -> None:
    burst(pipeline, timedelta(minutes=2), total=100, good=99)
    burst(pipeline, timedelta(minutes=5, seconds=20), total=50, good=40)
    burst(pipeline, timedelta(minutes=20), total=200, good=190)
    burst(pipeline, timedelta(minutes=50), total=100, good=100)
    burst(pipeline, timedelta(hours=3), total=1000, good=995)
    burst(pipeline, timedelta(days=2), total=10_000, good=9_900)
    burst(pipeline, timedelta(days=10), total=50_000, good=49_000)
    burst(pipeline, timedelta(days=35), total=99_999, good=0)

    status = pipeline_objective_status(pipeline=pipeline, now=NOW)

    assert status is not None
    assert (status.target, status.threshold_ms, status.period_days) == (Decimal("99"), 2000, 30)
    rates = {rate.window: rate for rate in status.burn_rates}
    assert list(rates) == ["5m", "30m", "1h", "6h", "3d"]
    assert (rates["5m"].total, rates["5m"].good) == (100, 99)
    assert (rates["30m"].total, rates["30m"].good) == (350, 329)
    assert (rates["1h"].total, rates["1h"].good) == (450, 429)
    assert (rates["6h"].total, rates["6h"].good) == (1450, 1424)
    assert (rates["3d"].total, rates["3d"].good) == (11_450, 11_324)
    expected = {"5m": 1 / 100, "30m": 21 / 350, "1h": 21 / 450, "6h": 26 / 1450, "3d": 126 / 11450}
    for name, fraction in expected.items():
        assert rates[name].bad_fraction == pytest.approx(fraction)
        assert rates[name].burn_rate == pytest.approx(fraction / 0.01)
    assert (status.total, status.good, status.bad) == (61_450, 60_324, 1_126)
    assert status.allowed_bad == pytest.approx(614.5)
    assert status.error_budget_remaining == pytest.approx((614.5 - 1126) / 614.5)


def test_an_untouched_budget_is_whole_and_burns_nothing(pipeline: Pipeline) -> None:
    burst(pipeline, timedelta(minutes=1), total=500, good=500)
    status = pipeline_objective_status(pipeline=pipeline, now=NOW)
    assert status is not None
    assert status.error_budget_remaining == 1.0
    assert status.burn_rates[0].burn_rate == 0.0


def test_without_traffic_there_is_nothing_to_report(pipeline: Pipeline) -> None:
    status = pipeline_objective_status(pipeline=pipeline, now=NOW)
    assert status is not None
    assert (status.total, status.error_budget_remaining) == (0, None)
    assert all(rate.burn_rate is None for rate in status.burn_rates)


def test_other_pipelines_and_stage_rollups_do_not_count(
    pipeline: Pipeline, world: TeamWorld
) -> None:
    other = make_pipeline(world.team, "other")
    burst(other, timedelta(minutes=1), total=100, good=0)
    put_bucket(pipeline, 42, NOW - timedelta(seconds=30), [100.0] * 7, good=0)
    burst(pipeline, timedelta(minutes=1), total=10, good=9)
    status = pipeline_objective_status(pipeline=pipeline, now=NOW)
    assert status is not None
    assert (status.total, status.good) == (10, 9)


def test_a_pipeline_without_an_objective_has_no_status(world: TeamWorld) -> None:
    pipeline = make_pipeline(world.team, "plain")
    assert pipeline_objective_status(pipeline=pipeline, now=NOW) is None


@given(
    start=st.integers(min_value=0, max_value=40 * 86400),
    length=st.integers(min_value=1, max_value=40 * 86400),
    recent=st.booleans(),
)
def test_tiles_cover_the_window_once_with_aligned_buckets(
    start: int, length: int, recent: bool
) -> None:
    resolutions = RECENT_RESOLUTIONS if recent else OLDER_RESOLUTIONS
    tiles = sorted(
        tile_runs(start=start, end=start + length, resolutions=resolutions), key=lambda t: t[1]
    )
    finest = resolutions[-1]
    assert tiles[0][1] == start - start % finest
    assert tiles[-1][2] == -(-(start + length) // finest) * finest
    for (_, _, end), (_, next_start, _) in pairwise(tiles):
        assert end == next_start
    for resolution, low, high in tiles:
        assert low % resolution == 0
        assert high % resolution == 0
        assert low < high


@pytest.mark.parametrize("into_bucket", [timedelta(milliseconds=300), timedelta(seconds=4)])
def test_traffic_of_the_bucket_now_falls_in_counts(
    pipeline: Pipeline, into_bucket: timedelta
) -> None:
    # "now" a fraction of a second past a 10 s boundary still reaches into that bucket.
    boundary = T0 + timedelta(days=40, hours=12, seconds=10)
    put_bucket(pipeline, None, boundary, [100.0] * 30, resolution=10, good=29)

    status = pipeline_objective_status(pipeline=pipeline, now=boundary + into_bucket)

    assert status is not None
    assert (status.total, status.good) == (30, 29)
    assert status.burn_rates
    assert all(rate.total == 30 for rate in status.burn_rates)


def test_each_window_says_how_much_of_it_has_data_and_whether_it_is_judged(
    pipeline: Pipeline,
) -> None:
    # Data since 40 minutes ago: all of 5 and 30 minutes, two thirds of the hour.
    burst(pipeline, timedelta(minutes=40), total=10, good=10)
    burst(pipeline, timedelta(minutes=1), total=10, good=9)

    status = pipeline_objective_status(pipeline=pipeline, now=NOW)

    assert status is not None
    assert status.min_coverage == 0.5
    shares = {rate.window: (rate.coverage, rate.judged) for rate in status.burn_rates}
    since = 40 * 60 + 5  # from the start of the 10 s bucket holding the first request
    assert shares == {
        "5m": (1.0, True),
        "30m": (1.0, True),
        "1h": (pytest.approx(since / 3600), True),
        "6h": (pytest.approx(since / 21600), False),
        "3d": (pytest.approx(since / 259200), False),
    }


def test_a_lower_minimum_share_judges_shorter_histories(
    pipeline: Pipeline, settings: Settings
) -> None:
    settings.BURN_RATE_MIN_COVERAGE = 0.1
    burst(pipeline, timedelta(hours=1), total=10, good=10)
    status = pipeline_objective_status(pipeline=pipeline, now=NOW)
    assert status is not None
    assert [rate.judged for rate in status.burn_rates] == [True, True, True, True, False]
