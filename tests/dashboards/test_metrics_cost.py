"""A scrape's cost is bounded: a team at the pipeline cap, each pipeline with 20 busy
stages (the default METRICS_MAX_STAGES in all), answers well within the web's statement
timeout, in a number of statements that does not grow with the team."""

import time
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest
from django.conf import settings
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from apps.core.sql_arrays import array_literal
from apps.core.time import RESOLUTIONS
from apps.dashboards.selectors.metrics import WINDOWS, window_bounds
from apps.pipelines.models import Stage
from apps.rollups.models import E2E_STAGE_ID, UNTRACKED_STAGE_ID, Measure, RollupBucket
from apps.rollups.selectors.windows import Tile, tile_window
from apps.rollups.sketches.ddsketch import Sketch
from apps.teams.models import Team
from apps.teams.services import metrics_token_create
from tests.builders.configuration import make_pipeline
from tests.conftest import TeamWorld

STAGES_PER_PIPELINE = 20

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("clean_cache", "allowance_clock")]


def busy_team(team: Team, pipelines: int) -> int:
    """``pipelines`` pipelines of 20 stages, with rows in every bucket both windows read
    and in today's day bucket, each holding a sketch of a hundred values; the rows made."""
    rng = np.random.default_rng(1)
    blob = Sketch.from_values(rng.lognormal(np.log(300), 0.6, 100)).to_bytes()
    now = int(time.time())
    moment = datetime.fromtimestamp(now, UTC)
    tiles = set()
    for window in WINDOWS.values():
        start, end = window_bounds(now=moment, seconds=window.seconds)
        tiles.update(tile_window(start=start, end=end))
    tiles.add(Tile(RESOLUTIONS[-1], now - now % RESOLUTIONS[-1]))
    ids = []
    for index in range(pipelines):
        pipeline = make_pipeline(team, f"pipeline-{index:03}", budget={"p95": 2000})
        ids.append(pipeline.pk)
        Stage.objects.bulk_create(
            Stage(pipeline=pipeline, slug=f"s{n:02}", name=f"Stage {n}", position=n, budget_ms=200)
            for n in range(STAGES_PER_PIPELINE)
        )
    # Written by the database, each scope in each tile: 100 000 rows in a second.
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {RollupBucket._meta.db_table} (team_id, pipeline_id, stage_id, measure,
                resolution, bucket_start, count, error_count, good_count, sum_ns, max_ns,
                sketch, computed_at)
            SELECT %(team)s, scope.pipeline_id, scope.stage_id, m.measure, t.resolution,
                to_timestamp(t.start), 100, 0, 0, 30000000000, 2000000000, %(blob)s, now()
            FROM (
                SELECT pipeline_id, id AS stage_id FROM {Stage._meta.db_table}
                    WHERE pipeline_id = ANY(%(pipelines)s::bigint[])
                UNION ALL SELECT p, %(e2e)s FROM unnest(%(pipelines)s::bigint[]) AS p
                UNION ALL SELECT p, %(untracked)s FROM unnest(%(pipelines)s::bigint[]) AS p
            ) AS scope
            CROSS JOIN unnest(%(resolutions)s::int[], %(starts)s::bigint[]) AS t(resolution, start)
            CROSS JOIN (VALUES (%(wall)s), (%(critical)s)) AS m(measure)
            """,
            {
                "team": team.pk, "blob": blob, "pipelines": array_literal(ids),
                "e2e": E2E_STAGE_ID, "untracked": UNTRACKED_STAGE_ID,
                "resolutions": array_literal(t.resolution for t in tiles),
                "starts": array_literal(t.start for t in tiles),
                "wall": int(Measure.WALL), "critical": int(Measure.CRITICAL),
            },
        )  # fmt: skip
        return int(cursor.rowcount)


def timed_scrape(token: str) -> tuple[float, int, Any]:
    client = Client(headers={"Authorization": f"Bearer {token}"})
    with CaptureQueriesContext(connection) as queries:
        started = time.monotonic()
        response = client.get("/metrics")
        took = time.monotonic() - started
    assert response.status_code == 200
    return took, len(queries), response


def test_a_team_at_the_caps_answers_within_the_statement_timeout(world: TeamWorld) -> None:
    rows = busy_team(world.team, settings.ACCOUNT_MAX_PIPELINES)
    busy_team(world.other_team, 1)
    # Every stage busy in every bucket the two windows read: how many buckets that is
    # depends on the time of day (a window aligned on the hour takes coarser tiles), from
    # 7 tiles (30,800 rows) to 30.
    assert RollupBucket.objects.filter(team_id=world.team.pk).count() == rows >= 30_800
    _, token = metrics_token_create(team=world.team, name="p", created_by=world.owner)
    _, small = metrics_token_create(team=world.other_team, name="p", created_by=world.outsider)

    took, statements, response = timed_scrape(token)
    _, small_statements, _ = timed_scrape(small)

    text = response.content.decode()
    assert text.count("latency_budget_stage_budget_seconds{") == 100 * STAGES_PER_PIPELINE
    assert 'latency_budget_scrape_omitted{team="acme",kind="stages"} 0\n' in text
    # Every stage's percentiles over both windows were read, not left out.
    assert text.count("latency_budget_stage_duration_seconds{") == 100 * 20 * 4 * 2
    assert took < settings.WEB_STATEMENT_TIMEOUT_S, took
    assert statements == small_statements  # a fixed number, whatever the team holds
    # The next scrape within the cache period costs no computation.
    again, cached_statements, _ = timed_scrape(token)
    assert cached_statements <= 2
    assert again < 0.2
