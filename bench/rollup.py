"""Rollup throughput and freshness against the ingestion goal.

The goal is 30,000 spans/s: 4,000 traces/s of one root and 8 stage spans each,
so 32,000 stage samples/s. Traces and samples are written directly (finalization
is not measured here), with lognormal times, on one pipeline of 8 stages.

* backfill: a burst of traces over 5 minutes, all dirty at once, rolled up from
  scratch; samples/s is the raw rollup throughput.
* steady: 2-second steps, as the scheduler runs the task every 2 s. Each step
  writes 2 s of finalized traces, started 11-13 s earlier (a trace is finalized
  10 s after its last span), then one rollup pass runs. A busy 10-second bucket
  is recomputed whole on every pass that touches it, so a pass reads several
  times the samples written since the last one. The pass must take under 2 s to
  keep pace; a trace finalized just after a pass is in the 10 s rollups one beat
  and one pass later, so freshness is at most 2 s plus the pass time.

samples_per_s is samples written divided by the time spent rolling them up.
"""

import statistics
import time
from datetime import timedelta
from typing import Any

import numpy as np
from django.db import connection
from django.test.utils import setup_test_environment
from django.utils import timezone

from apps.core.time import NS_PER_MS, NS_PER_S, to_seconds
from bench.report import percentile, print_rows, write

TRACES_PER_S = 4000
STAGES = 8
BACKFILL_TRACES = 40_000
BACKFILL_SPAN_S = 300
STEP_S = 2
STEPS = 15
FINALIZE_DELAY_S = 11


def _populate() -> tuple[Any, list[int]]:
    from tests.builders.configuration import make_pipeline, make_stage, make_team, make_user

    team = make_team("bench", owner=make_user("bench"))
    pipeline = make_pipeline(team, "rag", objective_target="99.000", objective_threshold_ms=1500)
    stages = [make_stage(pipeline, f"stage-{i}").pk for i in range(STAGES)]
    return pipeline, stages


def _write_samples(rows: list[tuple[Any, ...]]) -> None:
    columns = (
        "trace_pk", "stage_id", "start_ns", "team_id", "pipeline_id", "wall_ns",
        "critical_ns", "span_count", "error",
    )  # fmt: skip
    from apps.analysis.models import StageSample

    with connection.cursor() as cursor:
        table = StageSample._meta.db_table
        statement = f"COPY {table} ({', '.join(columns)}) FROM STDIN"
        with cursor.cursor.copy(statement) as copy:
            for row in rows:
                copy.write_row(row)


def _write_traces(
    pipeline: Any, stages: list[int], rng: np.random.Generator, starts: np.ndarray
) -> int:
    """Finalized traces starting at ``starts`` (ns) with their samples; marks their
    buckets dirty as finalization does. Returns the number of samples."""
    from apps.analysis.services.dirty_buckets import dirty_buckets_mark
    from apps.ingest.models import Trace, TraceState

    now = timezone.now()
    e2e = (rng.lognormal(np.log(900), 0.5, len(starts)) * NS_PER_MS).astype(np.int64)
    first_id = int(rng.integers(1 << 60))
    traces = Trace.objects.bulk_create(
        [
            Trace(
                team_id=pipeline.team_id, trace_id=(first_id + i).to_bytes(16, "big"),
                state=TraceState.FINALIZED, first_seen_at=now, last_span_at=now, span_count=9,
                start_ns=int(start), end_ns=int(start + total), pipeline_id=pipeline.pk,
                error=bool(i % 50 == 0), untracked_critical_ns=int(total // 20),
                finalized_at=now, revision=1,
            )
            for i, (start, total) in enumerate(zip(starts, e2e, strict=True))
        ],
        batch_size=2000,
    )  # fmt: skip
    shape = (len(traces), len(stages))
    walls = (rng.lognormal(np.log(120), 0.7, shape) * NS_PER_MS).astype(np.int64)
    rows = [
        (trace.pk, stage, trace.start_ns, pipeline.team_id, pipeline.pk, int(wall),
         int(wall) // 2, 1, False)
        for trace, trace_walls in zip(traces, walls.tolist(), strict=True)
        for stage, wall in zip(stages, trace_walls, strict=True)
    ]  # fmt: skip
    _write_samples(rows)
    dirty_buckets_mark((pipeline.pk, int(start)) for start in starts)
    return len(rows)


def _drain() -> tuple[float, int]:
    from apps.rollups.services.bucket_pass import rollups_process_dirty

    start, buckets = time.perf_counter(), 0
    while done := rollups_process_dirty().buckets:
        buckets += done
    return time.perf_counter() - start, buckets


def _backfill(pipeline: Any, stages: list[int], rng: np.random.Generator) -> dict[str, Any]:
    base = to_seconds(timezone.now() - timedelta(minutes=30)) * NS_PER_S
    starts = base + (rng.random(BACKFILL_TRACES) * BACKFILL_SPAN_S * NS_PER_S).astype(np.int64)
    samples = _write_traces(pipeline, stages, rng, starts)
    seconds, buckets = _drain()
    return {
        "traces": BACKFILL_TRACES,
        "samples": samples,
        "buckets": buckets,
        "seconds": round(seconds, 2),
        "traces_per_s": round(BACKFILL_TRACES / seconds),
        "samples_per_s": round(samples / seconds),
    }


def _steady(pipeline: Any, stages: list[int], rng: np.random.Generator) -> dict[str, Any]:
    base = to_seconds(timezone.now() - timedelta(minutes=20)) * NS_PER_S
    passes, written, buckets = [], 0, 0
    per_step = TRACES_PER_S * STEP_S
    for step in range(1, STEPS + 1):
        finalized_until = base + step * STEP_S * NS_PER_S
        earliest = finalized_until - (FINALIZE_DELAY_S + STEP_S) * NS_PER_S
        starts = earliest + (rng.random(per_step) * STEP_S * NS_PER_S).astype(np.int64)
        written += _write_traces(pipeline, stages, rng, starts)
        seconds, done = _drain()
        passes.append(seconds)
        buckets += done
    steady = passes[2:]  # the first passes see half-filled buckets
    pass_p95 = percentile(steady, 95)
    return {
        "traces": per_step * STEPS,
        "samples": written,
        "buckets": buckets,
        "seconds": round(sum(passes), 2),
        "traces_per_s": round(per_step * STEPS / sum(passes)),
        "samples_per_s": round(written / sum(passes)),
        "pass_mean_s": round(statistics.fmean(steady), 3),
        "pass_p95_s": round(pass_p95, 3),
        "keep_pace_x": round(STEP_S / pass_p95, 1),
        "freshness_max_s": round(STEP_S + pass_p95, 2),
    }


def run() -> None:
    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        rng = np.random.default_rng(20)
        pipeline, stages = _populate()
        rows = {"backfill, 5 min at once": _backfill(pipeline, stages, rng)}
        other, other_stages = _populate_second(pipeline.team)
        rows[f"steady, {TRACES_PER_S:,} traces/s"] = _steady(other, other_stages, rng)
        columns = ["traces", "samples", "seconds", "traces_per_s", "samples_per_s"]
        print_rows("Rollups: throughput (one worker, one core)", rows, columns)
        steady = {k: v for k, v in rows.items() if "pass_mean_s" in v}
        print_rows(
            "Rollups: steady state at the ingestion goal",
            steady,
            ["pass_mean_s", "pass_p95_s", "keep_pace_x", "freshness_max_s"],
        )
        setup = {
            "stages": STAGES, "traces_per_s": TRACES_PER_S, "step_s": STEP_S, "steps": STEPS,
            "backfill_traces": BACKFILL_TRACES, "backfill_span_s": BACKFILL_SPAN_S,
        }  # fmt: skip
        print(f"\nwritten {write('rollup', rows, setup)}")
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


def _populate_second(team: Any) -> tuple[Any, list[int]]:
    from tests.builders.configuration import make_pipeline, make_stage

    pipeline = make_pipeline(team, "agent")
    return pipeline, [make_stage(pipeline, f"agent-{i}").pk for i in range(STAGES)]
