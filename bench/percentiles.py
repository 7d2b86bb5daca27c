"""Server time of the percentile and series API over 30 days of rollups.

One pipeline of 20 stages with rollups as retention leaves them: 10-second
buckets for the last 2 hours, minutes for 3 days, hours and days for 30 days.
Each bucket of each series (end to end, untracked, and wall and critical-path
time of every stage: 42 series) holds a sketch of 50 to 500 lognormal values.
Beside them, ``BENCH_SPANS`` spans (default 10,000,000) over the last 7 days fill
the span table's day partitions, as a busy deployment holds them: the API reads no
spans, and this shows the answers do not slow down with a large span table beside
the rollups. Requests go through the full Django stack in process with a personal
API token.
The process keeps no decoded sketches between requests, so every request decodes
and merges all the sketches its window needs: what an earlier version, which
cached decoded sketches per process, called a cold request.
"""

import os
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import numpy as np
from django.db import connection
from django.db.models import Avg, Count, Max, Min
from django.db.models.functions import Length
from django.test import Client
from django.test.utils import setup_test_environment

from apps.core.time import NS_PER_DAY, NS_PER_MS, NS_PER_S, S_PER_DAY, align_down, to_datetime
from bench.report import print_rows, print_table, summarise, write

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from apps.pipelines.models import Pipeline, Stage
    from apps.teams.models import Team

STAGES = 20
REQUESTS = 50
HORIZONS = {10: 2 * 3600, 60: 3 * 86400, 600: 3 * 86400, 3600: 30 * 86400, 86400: 30 * 86400}
WINDOWS = ["15m", "1h", "24h", "7d", "30d"]
SPANS = int(os.environ.get("BENCH_SPANS", "10000000"))
SPAN_DAYS = 7


def _store_spans(team_id: int, now: int) -> int:
    """Spans of 8-span traces spread over the last days, written by PostgreSQL itself."""
    from apps.core.partitions import partitions_ensure
    from apps.ingest.models import Span

    table = Span._meta.db_table

    if SPANS <= 0:
        return 0
    today = to_datetime(now).date()
    partitions_ensure(table, first=today - timedelta(days=SPAN_DAYS), last=today)
    first_ns = (now - SPAN_DAYS * S_PER_DAY) * NS_PER_S
    step_ns = SPAN_DAYS * NS_PER_DAY // SPANS
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {table} (trace_pk, span_id, start_ns, team_id, trace_id,
                parent_span_id, name, service, kind, end_ns, status, status_message,
                scope_name, attributes, events, received_at)
            SELECT g / 8, int8send(g), %(first)s + g * %(step)s, %(team)s,
                decode(md5((g / 8)::text), 'hex'),
                CASE WHEN g %% 8 = 0 THEN NULL ELSE int8send(g - g %% 8) END,
                (ARRAY['POST /v1/chat', 'auth', 'embeddings', 'vector.search', 'rerank',
                       'tool.call', 'chat gpt-4o', 'queue.publish'])[g %% 8 + 1],
                'chat-api', 1, %(first)s + g * %(step)s + 20000000, 0, '', 'chat-api',
                jsonb_build_object('gen_ai.operation.name', 'chat', 'user.id', g %% 100000),
                '[]'::jsonb, now()
            FROM generate_series(0::bigint, %(count)s - 1) AS g
            """,
            {"first": first_ns, "step": step_ns, "team": team_id, "count": SPANS},
        )
        cursor.execute(f"ANALYZE {table}")
    return SPANS


@dataclass(frozen=True)
class Populated:
    """What ``populate`` made, for benchmarks that read the same data another way."""

    user: "User"
    team: "Team"
    pipeline: "Pipeline"
    stages: list["Stage"]
    token: str
    rows: int


def populate(now: int) -> Populated:
    from apps.rollups.models import E2E_STAGE_ID, UNTRACKED_STAGE_ID, Measure, RollupBucket
    from apps.rollups.sketches.ddsketch import Sketch
    from apps.teams.services import api_token_create
    from tests.builders.configuration import make_pipeline, make_stage, make_team, make_user

    user = make_user("bench")
    team = make_team("bench", owner=user)
    pipeline = make_pipeline(team, "rag-chat", budget={"p95": 2500, "p99": 4000})
    stages = [make_stage(pipeline, f"stage-{s:02d}", budget_ms=100 + 10 * s) for s in range(STAGES)]
    series = [(E2E_STAGE_ID, Measure.WALL, 900.0), (UNTRACKED_STAGE_ID, Measure.CRITICAL, 8.0)]
    for index, stage in enumerate(stages):
        median = 20.0 + 15 * index
        series += [(stage.pk, Measure.WALL, median), (stage.pk, Measure.CRITICAL, median * 0.8)]
    rng = np.random.default_rng(2025)
    batch: list[RollupBucket] = []
    rows = 0
    for resolution, horizon in HORIZONS.items():
        last = align_down(now, resolution)
        for start in range(last - horizon + resolution, last + resolution, resolution):
            bucket_start = to_datetime(start)
            for stage_id, measure, median in series:
                values = rng.lognormal(np.log(median), 0.6, int(rng.integers(50, 501)))
                sketch = Sketch.from_values(values)
                batch.append(
                    RollupBucket(
                        team_id=team.pk,
                        pipeline_id=pipeline.pk,
                        stage_id=stage_id,
                        measure=measure,
                        resolution=resolution,
                        bucket_start=bucket_start,
                        count=len(values),
                        error_count=int(rng.integers(0, 3)),
                        sum_ns=sketch.sum_ns,
                        max_ns=round(float(values.max()) * NS_PER_MS),
                        sketch=sketch.to_bytes(),
                    )
                )
            if len(batch) >= 5000:
                RollupBucket.objects.bulk_create(batch)
                rows += len(batch)
                batch = []
    RollupBucket.objects.bulk_create(batch)
    rows += len(batch)
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {RollupBucket._meta.db_table}")
    _, token = api_token_create(user=user, name="bench")
    started = time.perf_counter()
    spans = _store_spans(team.pk, now)
    if spans:
        print(f"{spans:,} spans stored in {time.perf_counter() - started:.1f} s")
    return Populated(user, team, pipeline, stages, token, rows)


def _sizes() -> dict[str, dict[str, Any]]:
    from apps.rollups.models import RollupBucket

    rows = {}
    stats = (
        RollupBucket.objects.values("resolution")
        .annotate(
            rows=Count("id"),
            bytes_mean=Avg(Length("sketch")),
            bytes_min=Min(Length("sketch")),
            bytes_max=Max(Length("sketch")),
        )
        .order_by("resolution")
    )
    for stat in stats:
        rows[f"{stat['resolution']} s buckets"] = {
            "rows": stat["rows"],
            "bytes_mean": round(stat["bytes_mean"], 1),
            "bytes_min": stat["bytes_min"],
            "bytes_max": stat["bytes_max"],
        }
    return rows


def _time(client: Client, url: str, auth: dict[str, str]) -> list[float]:
    client.get(url, headers=auth)  # connections and the database's cache
    samples = []
    for _ in range(REQUESTS):
        start = time.perf_counter()
        response = client.get(url, headers=auth)
        samples.append((time.perf_counter() - start) * 1000)
        assert response.status_code == 200, (url, response.status_code, response.content[:300])
    return samples


def run() -> None:
    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        now = int(time.time())
        started = time.perf_counter()
        populated = populate(now)
        token, rows = populated.token, populated.rows
        print(f"{rows:,} rollup rows written in {time.perf_counter() - started:.1f} s")
        client = Client()
        auth = {"Authorization": f"Bearer {token}"}
        base = "/api/v1/pipelines/rag-chat/"
        urls = {f"percentiles {w}": f"{base}percentiles?window={w}" for w in WINDOWS}
        urls["series 24h e2e p95"] = f"{base}series?window=24h&p=95"
        urls["series 24h stage critical p99"] = (
            f"{base}series?window=24h&stage=stage-07&measure=critical&p=99"
        )
        urls["series 7d e2e p95"] = f"{base}series?window=7d"
        timings: dict[str, dict[str, Any]] = {}
        for name, url in urls.items():
            timings[name] = summarise(_time(client, url, auth))
        print_table("Percentile and series API, server time in process (ms)", timings)
        sizes = _sizes()
        print_rows("Stored sketches", sizes, ["rows", "bytes_mean", "bytes_min", "bytes_max"])
        path = write(
            "percentiles",
            {**timings, **sizes},
            {
                "stages": STAGES,
                "series": 2 + 2 * STAGES,
                "rows": rows,
                "values_per_bucket": "50-500 lognormal",
                "requests": REQUESTS,
                "spans_stored": SPANS,
            },
        )
        print(f"\nwritten {path}")
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)
