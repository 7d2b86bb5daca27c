"""Traces a minute divide by the time that has data, not by the whole window.

A pipeline sending 300 traces a minute for three minutes shows 300 a minute over the
last hour, not 15: its count is divided by the three minutes since its first data.
"""

import re
import time
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from apps.core.time import RESOLUTIONS, align_down, to_datetime, to_seconds
from apps.dashboards.ranges import Range
from apps.dashboards.selectors.overview import team_overview
from apps.dashboards.selectors.pipeline_page import pipeline_page
from apps.pipelines.models import Pipeline
from apps.rollups.models import E2E_STAGE_ID, RollupBucket
from apps.rollups.selectors.data_span import (
    first_data,
    pipeline_data_from,
    pipelines_data_from,
)
from tests.builders.configuration import make_pipeline
from tests.builders.evaluation_rollups import T0, put_requests, put_requests_at
from tests.conftest import TeamWorld, client_for

NOW = T0 + timedelta(days=40, seconds=5)  # the windows end at T0 + 40 days
END = align_down(to_seconds(NOW), 10)
HOME = "/teams/acme/dashboards/"


def traffic(pipeline: Pipeline, *, end: int, seconds: int, per_10s: int) -> None:
    """``per_10s`` traces in every 10 s bucket of the ``seconds`` before ``end``."""
    moments = [to_datetime(start) for start in range(end - seconds, end, 10)]
    put_requests_at(pipeline, moments, total=per_10s, good=per_10s)


@pytest.fixture
def fresh(world: TeamWorld) -> Pipeline:
    """Three minutes of data, 50 traces every 10 s: 300 a minute."""
    pipeline = make_pipeline(world.team, "fresh")
    traffic(pipeline, end=END, seconds=180, per_10s=50)
    return pipeline


@pytest.fixture
def long_running(world: TeamWorld) -> Pipeline:
    """Sending for two hours: the last hour holds 600 traces, 10 a minute."""
    pipeline = make_pipeline(world.team, "long-running")
    put_requests(pipeline, to_datetime(END - 7200), total=1, good=1)
    traffic(pipeline, end=END, seconds=3600, per_10s=1)
    traffic(pipeline, end=END, seconds=1800, per_10s=1)  # the last half hour twice as busy
    return pipeline


def test_a_fresh_pipeline_shows_its_rate_over_the_minutes_with_data(
    world: TeamWorld, fresh: Pipeline, long_running: Pipeline
) -> None:
    rows = {
        row.pipeline.slug: row.figures
        for row in team_overview(team=world.team, percentile="p95", window="1h", now=NOW)
    }

    assert rows["fresh"].e2e.count == 900
    assert rows["fresh"].seconds_with_data == 180
    assert rows["fresh"].per_minute == pytest.approx(300.0)
    assert rows["fresh"].partial_window
    # Sending for longer than the window: the whole hour counts, quiet parts included.
    assert rows["long-running"].e2e.count == 360 + 180
    assert rows["long-running"].seconds_with_data == 3600
    assert rows["long-running"].per_minute == pytest.approx(540 / 60)
    assert not rows["long-running"].partial_window


def test_a_pipeline_without_data_has_no_rate(world: TeamWorld) -> None:
    make_pipeline(world.team, "silent")
    (row,) = team_overview(team=world.team, percentile="p95", window="1h", now=NOW)
    assert (row.figures.e2e.count, row.figures.per_minute) == (0, None)


def test_data_that_began_before_a_past_window_counts_the_whole_window(fresh: Pipeline) -> None:
    # The quarter of an hour that ended a minute ago: data covered its last two minutes.
    page = pipeline_page(
        pipeline=fresh,
        range_=Range("15m", END - 60 - 900, END - 60, "p95", live=False, errors=[]),
        now=NOW,
    )
    assert page.figures.e2e.count == 600
    assert page.figures.seconds_with_data == 120
    assert page.figures.per_minute == pytest.approx(300.0)


def test_the_pipeline_page_shows_the_rate_over_the_time_with_data(fresh: Pipeline) -> None:
    page = pipeline_page(
        pipeline=fresh, range_=Range("1h", END - 3600, END, "p95", live=False, errors=[]), now=NOW
    )
    assert page.figures.per_minute == pytest.approx(300.0)


# --- the pages, at the real time


def _within_one_tick() -> int:
    """The end of the windows a page asks for now, with the 10 s tick not about to turn:
    the page and the data must agree on it."""
    if time.time() % 10 > 8:
        time.sleep(10 - time.time() % 10 + 0.05)
    return align_down(to_seconds(timezone.now()), 10)


@pytest.mark.parametrize("role", ["owner", "editor", "viewer"])
def test_the_team_home_shows_300_a_minute_for_300_a_minute(world: TeamWorld, role: str) -> None:
    pipeline = make_pipeline(world.team, "rag-chat")
    end = _within_one_tick()
    traffic(pipeline, end=end, seconds=180, per_10s=50)

    html = client_for(getattr(world, role)).get(HOME).content.decode()

    row = re.search(r'<tr data-pipeline="rag-chat".*?</tr>', html, re.S)
    assert row
    rate = re.search(r'data-role="rate"[^>]*>(.*?)</td>', row.group(0), re.S)
    assert rate
    assert "300.0/min" in rate.group(1)
    assert "900 traces in 3 min" in rate.group(1)
    assert "15.0/min" not in html


def test_the_pipeline_page_shows_300_a_minute_over_the_minutes_with_data(
    world: TeamWorld,
) -> None:
    pipeline = make_pipeline(world.team, "rag-chat")
    end = _within_one_tick()
    traffic(pipeline, end=end, seconds=180, per_10s=50)

    html = client_for(world.viewer).get(f"{HOME}rag-chat/").content.decode()

    traffic_kpi = html.split('data-role="traffic"')[1].split("</div></div>")[0]
    assert "300.0 a minute over the 3 min with data" in traffic_kpi
    assert client_for(world.outsider).get(f"{HOME}rag-chat/").status_code == 404


# --- since when a pipeline has data


def test_the_first_data_is_the_finest_resolution_that_still_holds_the_start() -> None:
    start = to_seconds(T0) + 3 * 3600 + 25 * 60 + 30  # 03:25:30
    # Young: every resolution holds the start; the 10 s bucket tells it exactly.
    firsts = {r: align_down(start, r) for r in RESOLUTIONS}
    assert first_data(firsts) == start
    # The 10 s buckets of the first hour pruned: the minute is the finest that knows.
    assert first_data({**firsts, 10: start + 3600}) == align_down(start, 60)
    # Minutes pruned too, and the ten-minute buckets.
    assert first_data({**firsts, 10: start + 86400, 60: start + 86400, 600: start + 86400}) == (
        align_down(start, 3600)
    )
    assert first_data(dict.fromkeys(RESOLUTIONS)) is None


def test_since_when_pipelines_have_data_is_read_in_one_statement(
    world: TeamWorld, fresh: Pipeline, long_running: Pipeline, django_assert_num_queries: object
) -> None:
    silent = make_pipeline(world.team, "silent")
    with django_assert_num_queries(1):  # type: ignore[operator]
        found = pipelines_data_from(pipeline_ids=[fresh.pk, long_running.pk, silent.pk])
    assert found == {fresh.pk: END - 180, long_running.pk: END - 7200, silent.pk: None}


def test_pruned_fine_buckets_leave_the_start_to_the_coarser_ones(long_running: Pipeline) -> None:
    RollupBucket.objects.filter(
        pipeline_id=long_running.pk,
        stage_id=E2E_STAGE_ID,
        resolution__in=(10, 60),
        bucket_start__lt=to_datetime(END - 3600),
    ).delete()
    assert pipeline_data_from(pipeline_id=long_running.pk) == align_down(END - 7200, 600)


def test_the_objective_table_says_which_windows_have_too_little_data(world: TeamWorld) -> None:
    pipeline = make_pipeline(
        world.team, "rag-chat", objective_target=Decimal("99"), objective_threshold_ms=2000
    )
    end = _within_one_tick()
    traffic(pipeline, end=end, seconds=180, per_10s=50)

    html = client_for(world.viewer).get(f"{HOME}rag-chat/").content.decode()

    objective = html.split('id="objective"')[1].split("</section>")[0]
    cells = dict(re.findall(r'data-window="(\w+)">(.*?)</td>', objective, re.S))
    assert "not judged yet" not in cells["5m"]
    for window in ("30m", "1h", "6h", "3d"):
        assert re.search(r"3 min( \d+ s)? of data in it: not judged yet", cells[window])
    assert "once the pipeline's data covers 50 % of it" in objective
