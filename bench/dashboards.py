"""Server time, size and SQL queries of the dashboard pages and their htmx fragments.

The data is what ``bench/percentiles.py`` builds: one pipeline of 20 stages with 30 days
of rollups as retention leaves them, and ``BENCH_SPANS`` spans (default 10,000,000) in
the span table beside them. To it come a span rule per stage, open and closed
violations, and one trace of 1,000 spans sent through ingestion (stored batches, drain,
finalization) whose spans fall in the pipeline's stages, for the trace page (its first
rows, and as htmx fragments a span's details and the next rows). Apart, a
team of 50 pipelines of 20 stages with a day of rollups each shows the team home at
that size; its buckets are written by PostgreSQL from a pool of real sketches, as
sketching millions of buckets one by one in Python would take a quarter of an hour.

Requests go through the full Django stack in process, signed in with a session as an
editor of both teams. Per page: one warm-up request, then ``REQUESTS`` timed ones
(wall time, and the process's CPU time per request: the Python side, without
PostgreSQL's), the body's size and the SQL statements of one request.
``BENCH_PROFILE=1`` prints a profile of one request of each page over its time goal.
"""

import cProfile
import io
import os
import pstats
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import numpy as np
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext, setup_test_environment
from django.utils import timezone

from apps.core.startup import freeze_startup_objects
from apps.core.time import NS_PER_MS, NS_PER_S, align_down
from bench.percentiles import SPANS, STAGES, Populated, populate
from bench.report import print_rows, print_table, summarise, write

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from apps.pipelines.models import Pipeline, Stage
    from apps.teams.models import Team

REQUESTS = 40
PROFILE = os.environ.get("BENCH_PROFILE", "") == "1"
WINDOWS = ["15m", "1h", "24h", "7d", "30d"]

FLEET_PIPELINES = 50
FLEET_HORIZONS = {
    10: 2 * 3600, 60: 25 * 3600, 600: 25 * 3600, 3600: 25 * 3600, 86400: 2 * 86400,
}  # fmt: skip
# Distinct sketches per series of each fleet pipeline; buckets take them in turn.
FLEET_VARIANTS = 8

TRACE_SPANS = 1000
TRACE_BATCHES = 4
TRACE_ID = 0x7D3A_5B10_C0FF_EE00_1234_5678_9ABC_DEF0
# Spans under each stage's own span, four at a time side by side.
LEAVES_PER_STAGE = (TRACE_SPANS - 1 - STAGES - (STAGES - 1)) // STAGES

# The goals (p95 of server time, body size).
PAGE_MS = 100
FRAGMENT_MS = 50
LONG_VIEW_MS = 150  # a 30-day window, page or fragment
TRACE_MS = 150
SIZE_KB = 150
HTMX = {"HX-Request": "true"}


@dataclass(frozen=True)
class Page:
    url: str
    fragment: bool
    goal_ms: int | None


def _add_rules(stages: list["Stage"]) -> None:
    from tests.builders.configuration import make_rule

    for stage in stages:
        make_rule(stage)  # spans named after the stage: "stage-07", "stage-07.step"


def _violations(populated: Populated) -> int:
    """Open ones for end to end and two stages; closed ones spread over the 30 days."""
    from apps.rollups.models import Violation

    now = timezone.now()
    pipeline, stages = populated.pipeline, populated.stages
    example = [f"{TRACE_ID:032x}"]

    def one(stage: "Stage | None", opened_hours_ago: float, closed: bool) -> Violation:
        opened = now - timedelta(hours=opened_hours_ago)
        budget = stage.budget_ms if stage else pipeline.budget["p95"]
        assert budget is not None
        return Violation(
            team=populated.team, pipeline=pipeline, stage=stage,
            percentile=stage.budget_percentile if stage else "p95", budget_ms=budget,
            window_s=300, observed_ms=budget * 1.2, peak_ms=budget * 1.6, sample_count=240,
            opened_at=opened,
            last_evaluated_at=opened + timedelta(minutes=40) if closed else now,
            closed_at=opened + timedelta(minutes=45) if closed else None,
            consecutive_ok=3 if closed else 0, example_trace_ids=example,
        )  # fmt: skip

    made = [one(None, 0.5, False), one(stages[3], 2, False), one(stages[11], 0.2, False)]
    for index in range(12):
        stage = None if index % 4 == 0 else stages[(5 * index) % STAGES]
        made.append(one(stage, 6 + 57 * index, True))
    Violation.objects.bulk_create(made)
    return len(made)


def _trace_spans(now_ns: int) -> list[Any]:
    """A root, each stage's span in turn with its leaves, and orchestration between them."""
    from tests.builders.spans import span

    t0 = now_ns - 20 * 60 * NS_PER_S
    ms = NS_PER_MS
    spans = []
    next_id = 2
    cursor = t0 + 5 * ms
    for index in range(STAGES):
        duration = (20 + 15 * index) * ms
        stage_id, name = next_id, f"stage-{index:02d}"
        spans.append(span(stage_id, 1, cursor, cursor + duration, name=name, trace_id=TRACE_ID))
        next_id += 1
        slots = -(-LEAVES_PER_STAGE // 4)
        width = duration // slots
        for leaf in range(LEAVES_PER_STAGE):
            start = cursor + (leaf // 4) * width
            end = start + width * (6 + leaf % 4) // 10
            kind = "client" if leaf % 4 == 0 else "internal"
            spans.append(
                span(next_id, stage_id, start, end, name=f"{name}.step", kind=kind,
                     attributes={"bench.step": leaf}, trace_id=TRACE_ID)
            )  # fmt: skip
            next_id += 1
        cursor += duration
        if index < STAGES - 1:
            # Untracked: no rule matches it, so its time is orchestration.
            spans.append(
                span(next_id, 1, cursor, cursor + 2 * ms, name="orchestrate", trace_id=TRACE_ID)
            )
            next_id += 1
            cursor += 3 * ms
    root = span(1, None, t0, cursor + 5 * ms, name="POST /v1/chat", kind="server",
                trace_id=TRACE_ID)  # fmt: skip
    return [root, *spans]


def _ingest_trace(team: "Team", pipeline: "Pipeline") -> float:
    """Send the trace as an SDK exporter would, in several batches, and finalize it."""
    from apps.analysis.services.finalize import traces_finalize_due
    from apps.ingest.models import Encoding, Trace
    from apps.ingest.services.batches import raw_batch_store, raw_batches_drain
    from tests.builders.spans import encode

    # The stored spans carry trace keys up to BENCH_SPANS / 8 without trace rows; a
    # trace row numbered among them would be read back with their spans.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT setval(pg_get_serial_sequence(%s, 'id'), %s)",
            [Trace._meta.db_table, 1 + SPANS // 8],
        )
    spans = _trace_spans(time.time_ns())
    assert len(spans) == TRACE_SPANS, len(spans)
    started = time.perf_counter()
    size = -(-len(spans) // TRACE_BATCHES)
    for first in range(0, len(spans), size):
        part = spans[first : first + size]
        raw_batch_store(
            team=team, token=None, encoding=Encoding.OTLP_PROTOBUF, body=encode(part),
            span_count=len(part),
        )  # fmt: skip
    raw_batches_drain()
    traces_finalize_due(now=timezone.now() + timedelta(hours=1))
    elapsed = time.perf_counter() - started
    trace = Trace.objects.get(team=team, trace_id=TRACE_ID.to_bytes(16, "big"))
    assert trace.pipeline_id == pipeline.pk, trace.pipeline_id
    assert trace.span_count == TRACE_SPANS, trace.span_count
    return elapsed


def _fleet(owner: "User", member: "User", now: int) -> int:
    """50 pipelines of 20 stages, each with a day of buckets of its own sketches."""
    from apps.rollups.models import (
        E2E_STAGE_ID,
        UNTRACKED_STAGE_ID,
        Measure,
        RollupBucket,
        Violation,
    )
    from apps.rollups.sketches.ddsketch import Sketch
    from apps.teams.models import Role
    from tests.builders.configuration import add_member, make_pipeline, make_stage, make_team

    team = make_team("fleet", owner=owner)
    add_member(team, member, Role.EDITOR)
    rng = np.random.default_rng(50)
    pool: list[tuple[Any, ...]] = []
    targets: list[tuple[int, int, int, int]] = []
    opened = timezone.now() - timedelta(minutes=30)
    violations = []
    for p in range(FLEET_PIPELINES):
        pipeline = make_pipeline(team, f"pipeline-{p:02d}", budget={"p95": 2500, "p99": 4000})
        stages = [
            make_stage(pipeline, f"stage-{s:02d}", budget_ms=100 + 10 * s) for s in range(STAGES)
        ]
        series = [(E2E_STAGE_ID, Measure.WALL, 900.0), (UNTRACKED_STAGE_ID, Measure.CRITICAL, 8.0)]
        for index, stage in enumerate(stages):
            median = 20.0 + 15 * index
            series += [(stage.pk, Measure.WALL, median), (stage.pk, Measure.CRITICAL, median * 0.8)]
        scale = float(rng.uniform(0.6, 1.8))  # some pipelines over their budget, most under
        for number, (stage_id, measure, median) in enumerate(series):
            targets.append((pipeline.pk, number, stage_id, measure))
            for variant in range(FLEET_VARIANTS):
                values = rng.lognormal(np.log(median * scale), 0.6, int(rng.integers(50, 501)))
                sketch = Sketch.from_values(values)
                pool.append((pipeline.pk, number, variant, len(values), int(rng.integers(0, 3)),
                             sketch.sum_ns, round(float(values.max()) * NS_PER_MS),
                             sketch.to_bytes()))  # fmt: skip
        if p % 10 == 3:
            violations.append(
                Violation(team=team, pipeline=pipeline, stage=None, percentile="p95",
                          budget_ms=2500, window_s=300, observed_ms=2900, peak_ms=3300,
                          sample_count=240, opened_at=opened, last_evaluated_at=opened)
            )  # fmt: skip
    Violation.objects.bulk_create(violations)
    table = RollupBucket._meta.db_table
    rows = 0
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TEMPORARY TABLE bench_pool (pipeline_id bigint, series int, variant int,"
            " count int, error_count int, sum_ns bigint, max_ns bigint, sketch bytea)"
        )
        cursor.execute(
            "CREATE TEMPORARY TABLE bench_target (pipeline_id bigint, series int,"
            " stage_id bigint, measure smallint)"
        )
        cursor.executemany("INSERT INTO bench_pool VALUES (%s, %s, %s, %s, %s, %s, %s, %s)", pool)
        cursor.executemany("INSERT INTO bench_target VALUES (%s, %s, %s, %s)", targets)
        for resolution, horizon in FLEET_HORIZONS.items():
            last = align_down(now, resolution)
            cursor.execute(
                f"""
                INSERT INTO {table} (team_id, pipeline_id, stage_id, measure, resolution,
                    bucket_start, count, error_count, good_count, sum_ns, max_ns, sketch,
                    computed_at)
                SELECT %(team)s, t.pipeline_id, t.stage_id, t.measure, %(resolution)s,
                    to_timestamp(s), p.count, p.error_count, 0, p.sum_ns, p.max_ns, p.sketch,
                    now()
                FROM bench_target t
                CROSS JOIN generate_series(%(first)s::bigint, %(last)s::bigint, %(resolution)s) s
                JOIN bench_pool p ON p.pipeline_id = t.pipeline_id AND p.series = t.series
                    AND p.variant = (s / %(resolution)s + t.series) %% %(variants)s
                """,
                {"team": team.pk, "resolution": resolution, "first": last - horizon + resolution,
                 "last": last, "variants": FLEET_VARIANTS},
            )  # fmt: skip
            rows += cursor.rowcount
        cursor.execute("DROP TABLE bench_pool, bench_target")
        cursor.execute(f"ANALYZE {table}")
    return rows


def _get(client: Client, page: Page) -> Any:
    response = client.get(page.url, headers=HTMX if page.fragment else None)
    assert response.status_code == 200, (page.url, response.status_code, response.content[:300])
    return response


def _measure(client: Client, page: Page) -> dict[str, Any]:
    _get(client, page)  # connections, the session, the database's cache
    with CaptureQueriesContext(connection) as queries:
        response = _get(client, page)
    # Counted now: the next request clears the connection's log that it reads.
    query_count = len(queries)
    body = response.content
    # A fragment is the region htmx swaps; a page is a whole document.
    assert (b"<html" in body) != page.fragment, (page.url, body[:200])
    samples = []
    cpu_started = time.process_time()
    for _ in range(REQUESTS):
        started = time.perf_counter()
        _get(client, page)
        samples.append((time.perf_counter() - started) * 1000)
    cpu_ms = (time.process_time() - cpu_started) / REQUESTS * 1000
    row: dict[str, Any] = summarise(samples)
    kb = round(len(body) / 1024, 1)
    row |= {
        "cpu_ms": round(cpu_ms, 2),
        "kb": kb,
        "queries": query_count,
        "goal_ms": page.goal_ms if page.goal_ms is not None else "-",
        "time": "-" if page.goal_ms is None else _verdict(row["p95_ms"] <= page.goal_ms),
        "goal_kb": SIZE_KB,
        "size": _verdict(kb <= SIZE_KB),
    }
    return row


def _verdict(met: bool) -> str:
    return "met" if met else "missed"


def _profile(client: Client, page: Page, name: str) -> None:
    profiler = cProfile.Profile()
    profiler.enable()
    _get(client, page)
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("cumulative").print_stats(30)
    stats.sort_stats("tottime").print_stats(15)
    print(f"\nProfile of one request: {name}\n{out.getvalue()}")


def _trace_rows() -> int:
    """How many of the trace's rows its page shows at first."""
    from apps.dashboards.views.traces import ROWS_PER_PAGE

    return min(TRACE_SPANS, ROWS_PER_PAGE)


def _pages(pipeline: str, stage: str, trace_hex: str) -> dict[str, Page]:
    base = f"/teams/bench/dashboards/{pipeline}/"
    pages = {
        "team home, 1 pipeline": Page("/teams/bench/dashboards/", False, PAGE_MS),
        "team home, 1 pipeline, fragment": Page("/teams/bench/dashboards/", True, FRAGMENT_MS),
        "team home, 50 pipelines": Page("/teams/fleet/dashboards/", False, PAGE_MS),
        "team home, 50 pipelines, fragment": Page("/teams/fleet/dashboards/", True, FRAGMENT_MS),
    }
    for window in WINDOWS:
        long = window == "30d"
        pages[f"pipeline {window}"] = Page(
            f"{base}?window={window}", False, LONG_VIEW_MS if long else PAGE_MS
        )
        pages[f"pipeline {window}, fragment"] = Page(
            f"{base}?window={window}", True, LONG_VIEW_MS if long else FRAGMENT_MS
        )
    for window in ("1h", "30d"):
        long = window == "30d"
        url = f"{base}stages/{stage}/?window={window}"
        # The issue sets no goal for a whole stage page under 30 days.
        pages[f"stage {window}"] = Page(url, False, LONG_VIEW_MS if long else None)
        pages[f"stage {window}, fragment"] = Page(url, True, LONG_VIEW_MS if long else FRAGMENT_MS)
    pages["fit check, fragment"] = Page(f"{base}fit/", True, FRAGMENT_MS)
    trace_url = f"/teams/bench/traces/{trace_hex}/"
    pages["trace, 1,000 spans"] = Page(trace_url, False, TRACE_MS)
    # A span's details and the next page of rows, as htmx asks for them.
    pages["trace, span details, fragment"] = Page(f"{trace_url}?span={3:016x}", True, TRACE_MS)
    pages["trace, next rows, fragment"] = Page(f"{trace_url}?rows={_trace_rows()}", True, TRACE_MS)
    pages["violations list"] = Page("/teams/bench/violations/", False, None)
    return pages


def run() -> None:
    from apps.teams.models import Role
    from tests.builders.configuration import add_member, make_user

    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        now = int(time.time())
        started = time.perf_counter()
        populated = populate(now)
        print(f"{populated.rows:,} rollup rows written in {time.perf_counter() - started:.1f} s")
        member = make_user("member")
        add_member(populated.team, member, Role.EDITOR)
        _add_rules(populated.stages)
        violations = _violations(populated)
        ingest_s = _ingest_trace(populated.team, populated.pipeline)
        print(f"{TRACE_SPANS:,}-span trace ingested and finalized in {ingest_s:.1f} s")
        started = time.perf_counter()
        fleet_rows = _fleet(populated.user, member, now)
        print(
            f"{FLEET_PIPELINES} pipelines with {fleet_rows:,} rollup rows written in "
            f"{time.perf_counter() - started:.1f} s"
        )

        # As a web process does after start-up (budgets_site/wsgi.py): what is alive now,
        # the benchmark's own data included, is never walked by the collector again.
        freeze_startup_objects()
        client = Client()
        client.force_login(member)
        pages = _pages(populated.pipeline.slug, populated.stages[7].slug, f"{TRACE_ID:032x}")
        trace_page = _get(client, pages["trace, 1,000 spans"]).content.decode()
        # The first page of rows; the others are a link away.
        shown = _trace_rows()
        assert trace_page.count("data-span=") == shown, trace_page.count("data-span=")
        assert shown == TRACE_SPANS or f'href="?rows={shown}"' in trace_page
        assert 'data-stage="stage-19"' in trace_page  # the breakdown reaches the last stage
        rows: dict[str, dict[str, Any]] = {}
        for name, page in pages.items():
            rows[name] = _measure(client, page)
            if PROFILE and rows[name]["time"] == "missed":
                _profile(client, page, name)
        print_table("Dashboard pages, server time in process (ms)", rows)
        print_rows(
            "Against the goals (p95 ms, KB); cpu_ms: this process's CPU time per request",
            rows,
            ["p95_ms", "goal_ms", "time", "cpu_ms", "kb", "goal_kb", "size", "queries"],
        )
        path = write(
            "dashboards",
            rows,
            {
                "stages": STAGES,
                "rollup_rows": populated.rows,
                "spans_stored": SPANS,
                "violations": violations,
                "trace_spans": TRACE_SPANS,
                "fleet_pipelines": FLEET_PIPELINES,
                "fleet_rollup_rows": fleet_rows,
                "requests": REQUESTS,
            },
        )
        print(f"\nwritten {path}")
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)
