"""Budget evaluation: time from a step change to an open violation, and the cost of a check.

Detection. Pipelines of three sequential stages receive 4 traces/s each (Poisson
arrivals, lognormal stage times). Retrieval (budget 350 ms at p95, evaluation
window 300 s, minimum 20 samples) runs at a median of 150 ms until its step
time, then at 600 ms. The schedule is simulated in process on a virtual clock:
traces are analyzed (Trace and StageSample rows, buckets marked dirty) at the first
whole second, as the 1 s finalize beat does, after their end plus the default 2 s
settle time; for comparison also right after their end, and after the 10 s idle
wait (the settle time raised to it: samples only once a trace is final). A rollup
pass runs right after each finalize pass that wrote samples (as the pass the
finalize task enqueues, at most one a second), and on the 2 s rollup beat; it
rewrites the 10 s buckets dirty for the rollup settle time
(``ROLLUP_SETTLE_SECONDS``, default 3 s; for comparison also 0, every pass), and is
followed by the prompt check of the pipelines whose 10 s buckets it rewrote (as
the task it enqueues would). The regular evaluation runs every 10 s; all are given
the virtual time. The default schedule is also run with the regular evaluation
alone, for comparison. The window is full before the step; step times are spread
over the evaluation period, one per pipeline, 40 in each mode. The latency is the
virtual time at which the violation opened minus the step time. With a full window
of steady traffic, p95 flips once 5 % of the window is slow: 15 s of a 300 s window.

Cost. 20 pipelines of 20 budgeted stages, each with a full 300 s window of
rollups (10 s buckets of 50 values and their minute buckets, 21 scopes; the
window reads whole minutes from minute buckets, its edges from 10 s ones, about
14 sketches per scope): the wall time of one ``budgets_evaluate`` pass, with
every scope within budget and with every scope over budget (400 violations
followed); and of one prompt check of one of those pipelines, within budget,
opening its 20 violations, and following them. One core, PostgreSQL and the
cache (Redis when ``REDIS_URL`` is set) on this machine.
"""

import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from django.db import connection
from django.test.utils import CaptureQueriesContext, setup_test_environment

from apps.core.time import NS_PER_MS, NS_PER_S, align_down, datetime_to_ns, to_datetime, to_seconds
from bench.report import percentile, print_rows, write

EPOCH = datetime(2026, 3, 2, tzinfo=UTC)
RATE = 4.0
WARMUP_S = 320
AFTER_S = 70
ROLLUP_EVERY_S = 2
EVALUATE_EVERY_S = 10
EVALUATE_PHASE_S = 3
COST_PIPELINES = 20
COST_STAGES = 20
COST_PASSES = 20
STEPS = 40
ROLLUP_SETTLE_S = 3.0  # the default of ROLLUP_SETTLE_SECONDS
# (when traces are analyzed, delay after their end in s, rollup settle time in s, seed,
# prompt checks on)
DETECTION_RUNS = (
    ("2 s after the end (default settle time)", 2.0, ROLLUP_SETTLE_S, 3, True),
    ("2 s after the end (default settle time)", 2.0, ROLLUP_SETTLE_S, 3, False),
    ("2 s after the end, buckets rewritten every pass", 2.0, 0.0, 3, True),
    ("at the trace's end", 0.0, ROLLUP_SETTLE_S, 1, True),
    ("10 s after the end (settle time = idle wait)", 10.0, ROLLUP_SETTLE_S, 2, True),
)


def _at(seconds: float) -> datetime:
    return EPOCH + timedelta(seconds=seconds)


def _ns(seconds: float) -> int:
    return datetime_to_ns(EPOCH) + round(seconds * NS_PER_S)


@dataclass
class _Pipeline:
    pipeline: Any
    stages: list[Any]
    step_at: float
    opened_at: float | None = None


def _detection_setup(
    team: Any, count: int, rng: np.random.Generator, prefix: str
) -> list[_Pipeline]:
    from tests.builders.configuration import make_pipeline, make_stage

    pipelines = []
    for index in range(count):
        pipeline = make_pipeline(team, f"{prefix}-{index:02d}", budget={"p95": 5000})
        stages = [
            make_stage(pipeline, "retrieval", budget_ms=350),
            make_stage(pipeline, "rerank", budget_ms=400),
            make_stage(pipeline, "generation", budget_ms=3000),
        ]
        step = WARMUP_S - 10 + index * EVALUATE_EVERY_S / count + rng.uniform(0, 0.5)
        pipelines.append(_Pipeline(pipeline, stages, step))
    return pipelines


def _traffic(pipelines: list[_Pipeline], rng: np.random.Generator, until: float) -> list[tuple]:
    """(end time, pipeline index, start, stage times in ms) of every trace, by end time."""
    traces = []
    for index, entry in enumerate(pipelines):
        starts = np.cumsum(rng.exponential(1 / RATE, int(until * RATE * 1.2)))
        for start in starts[starts < until]:
            median = 600.0 if start >= entry.step_at else 150.0
            times = (
                rng.lognormal(np.log(median), 0.3),
                rng.lognormal(np.log(120), 0.3),
                rng.lognormal(np.log(900), 0.4),
            )
            end = start + (sum(times) + 30) / 1000
            traces.append((end, index, float(start), times))
    traces.sort(key=lambda item: item[0])
    return traces


def _finalize(
    batch: list[tuple], pipelines: list[_Pipeline], team: Any, serial: list[int], second: int
) -> None:
    from apps.analysis.models import DirtyBucket, StageSample
    from apps.analysis.services.dirty_buckets import dirty_buckets_mark
    from apps.ingest.models import Trace, TraceState

    rows = []
    for end, index, start, _ in batch:
        serial[0] += 1
        rows.append(
            Trace(
                team=team, trace_id=serial[0].to_bytes(16, "big"), state=TraceState.FINALIZED,
                first_seen_at=_at(start), last_span_at=_at(end), span_count=4,
                root_span_id=serial[0].to_bytes(8, "big"), start_ns=_ns(start), end_ns=_ns(end),
                pipeline=pipelines[index].pipeline, untracked_critical_ns=30 * NS_PER_MS,
                finalized_at=_at(end),
            )
        )  # fmt: skip
    Trace.objects.bulk_create(rows)
    samples = []
    for trace, (_, index, start, times) in zip(rows, batch, strict=True):
        for stage, ms in zip(pipelines[index].stages, times, strict=True):
            samples.append(
                StageSample(
                    trace_pk=trace.pk, stage_id=stage.pk, start_ns=_ns(start),
                    team_id=team.pk, pipeline_id=stage.pipeline_id, wall_ns=round(ms * NS_PER_MS),
                    critical_ns=round(ms * NS_PER_MS), span_count=1,
                )
            )  # fmt: skip
    StageSample.objects.bulk_create(samples, batch_size=2000)
    dirty_buckets_mark((trace.pipeline_id, trace.start_ns) for trace in rows)
    # Rows made now carry the real clock, later than any virtual time: they were made at
    # this virtual second. Rows made earlier keep theirs.
    DirtyBucket.objects.filter(dirty_since__gt=_at(second)).update(dirty_since=_at(second))


def _detect(
    run: int, count: int, delay_s: float, settle_s: float, seed: int, *, prompt: bool
) -> list[float]:
    """The latencies of run number ``run``: its account, pipelines and trace ids are its
    own (an account holds at most ACCOUNT_MAX_PIPELINES), and runs of one seed get the
    same traffic."""
    from apps.rollups.services.evaluation import budgets_evaluate
    from tests.builders.configuration import make_team, make_user

    team = make_team(f"detect-{run}", owner=make_user(f"detect-{run}"))

    rng = np.random.default_rng(seed)
    pipelines = _detection_setup(team, count, rng, f"detect-{run}")
    traces = _traffic(pipelines, rng, WARMUP_S + AFTER_S)
    serial = [run * 10_000_000]
    position = 0
    for second in range(1, WARMUP_S + AFTER_S + 1):
        batch = []
        while position < len(traces) and traces[position][0] + delay_s <= second:
            batch.append(traces[position])
            position += 1
        if batch:
            _finalize(batch, pipelines, team, serial, second)
            _rollup_pass(pipelines, second, settle_s, prompt=prompt)
        if second % ROLLUP_EVERY_S == 0:
            _rollup_pass(pipelines, second, settle_s, prompt=prompt)
        if second % EVALUATE_EVERY_S == EVALUATE_PHASE_S:
            budgets_evaluate(now=_at(second))
            _note_opened(pipelines)
    early = [p for p in pipelines if p.opened_at is not None and p.opened_at < p.step_at]
    assert not early, "a violation opened before its step change"
    return [
        (p.opened_at - p.step_at) if p.opened_at is not None else float("inf") for p in pipelines
    ]


def _rollup_pass(pipelines: list[_Pipeline], second: int, settle_s: float, *, prompt: bool) -> None:
    """One run of the rollup task, then the prompt check it enqueues."""
    from apps.rollups.services.bucket_pass import rollups_process_dirty
    from apps.rollups.services.evaluation import budgets_check_promptly

    changed: set[int] = set()
    while (result := rollups_process_dirty(now=_at(second), settle_s=settle_s)).buckets:
        changed |= result.pipelines.get(10, set())
    if prompt and changed:
        budgets_check_promptly(pipeline_ids=changed, now=_at(second))
        _note_opened(pipelines)


def _note_opened(pipelines: list[_Pipeline]) -> None:
    from apps.rollups.models import Violation

    opened = dict(
        Violation.objects.filter(
            pipeline__in=[p.pipeline for p in pipelines], stage__slug="retrieval"
        ).values_list("pipeline_id", "opened_at")
    )
    for entry in pipelines:
        if entry.opened_at is None and entry.pipeline.pk in opened:
            entry.opened_at = (opened[entry.pipeline.pk] - EPOCH).total_seconds()


def _bucket(
    team: Any, pipeline: Any, stage_id: int, resolution: int, start: int, sketch: Any
) -> Any:
    from apps.rollups.models import Measure, RollupBucket

    return RollupBucket(
        team_id=team.pk, pipeline_id=pipeline.pk, stage_id=stage_id, measure=Measure.WALL,
        resolution=resolution, bucket_start=to_datetime(start),
        count=sketch.count, sum_ns=sketch.sum_ns, max_ns=round(sketch.max * NS_PER_MS),
        sketch=sketch.to_bytes(),
    )  # fmt: skip


def _cost_setup(team: Any, rng: np.random.Generator, now: datetime) -> list[Any]:
    from apps.rollups.models import E2E_STAGE_ID, RollupBucket
    from apps.rollups.sketches.ddsketch import Sketch
    from tests.builders.configuration import make_pipeline, make_stage

    pipelines, rows = [], []
    # Six whole minutes of 10 s buckets and their minute buckets, ending with now's.
    first = align_down(to_seconds(now), 60) - 300
    for p in range(COST_PIPELINES):
        pipeline = make_pipeline(team, f"cost-{p:02d}", budget={"p95": 8000})
        stages = [make_stage(pipeline, f"stage-{s:02d}", budget_ms=900) for s in range(COST_STAGES)]
        pipelines.append((pipeline, stages))
        for stage_id in [E2E_STAGE_ID, *(stage.pk for stage in stages)]:
            minutes: dict[int, list[Any]] = {}
            for bucket in range(36):
                start = first + 10 * bucket
                values = rng.lognormal(np.log(250), 0.5, 50)
                sketch = Sketch.from_values(values)
                minutes.setdefault(start - start % 60, []).append(sketch)
                rows.append(_bucket(team, pipeline, stage_id, 10, start, sketch))
            for start, children in minutes.items():
                rows.append(_bucket(team, pipeline, stage_id, 60, start, Sketch.merged(children)))
    RollupBucket.objects.bulk_create(rows, batch_size=2000)
    return pipelines


def _time_passes(now: datetime) -> tuple[list[float], int]:
    from apps.rollups.models import BudgetEvaluation
    from apps.rollups.services.evaluation import budgets_evaluate

    samples, queries = [], 0
    for _ in range(COST_PASSES):
        BudgetEvaluation.objects.update(evaluated_at=EPOCH - timedelta(days=1))
        connection.queries_log.clear()
        with CaptureQueriesContext(connection) as captured:
            start = time.perf_counter()
            result = budgets_evaluate(now=now)
            samples.append((time.perf_counter() - start) * 1000)
        assert result.pipelines >= COST_PIPELINES
        queries = len(captured.captured_queries)
    return samples, queries


def _time_checks(pipelines: list[Any], now: datetime) -> tuple[list[float], int]:
    """One prompt check of each pipeline alone (each is due once per period)."""
    from apps.rollups.services.evaluation import budgets_check_promptly

    samples, queries = [], 0
    for pipeline, _ in pipelines:
        connection.queries_log.clear()
        with CaptureQueriesContext(connection) as captured:
            start = time.perf_counter()
            result = budgets_check_promptly(pipeline_ids=[pipeline.pk], now=now)
            samples.append((time.perf_counter() - start) * 1000)
        assert result.pipelines == 1
        queries = len(captured.captured_queries)
    return samples, queries


def _cost_rows(team: Any) -> dict[str, dict[str, Any]]:
    from apps.pipelines.models import Pipeline, Stage
    from apps.rollups.models import Violation

    # Only the measured pipelines: the detection runs' ones would be evaluated too.
    Pipeline.objects.filter(team=team).delete()
    now = _at(10_000 + 5)
    pipelines = _cost_setup(team, np.random.default_rng(7), now)
    rows = {}
    within, queries = _time_passes(now)
    rows["pass, every scope within budget"] = _cost_row(within, queries)
    rows["prompt check, 1 pipeline within budget"] = _cost_row(*_time_checks(pipelines, now))
    Stage.objects.filter(pipeline__in=[p for p, _ in pipelines]).update(budget_ms=100)
    first_start = time.perf_counter()
    from apps.rollups.services.evaluation import budgets_evaluate

    budgets_evaluate(now=now + timedelta(seconds=10))
    first_ms = (time.perf_counter() - first_start) * 1000
    opened = Violation.objects.filter(closed_at__isnull=True, pipeline__slug__startswith="cost-")
    rows["first pass, opens 400 violations"] = _cost_row([first_ms], None)
    assert opened.count() == COST_PIPELINES * COST_STAGES
    over, queries = _time_passes(now + timedelta(seconds=10))
    rows["pass, 400 violations followed"] = _cost_row(over, queries)
    checks = _time_checks(pipelines, now + timedelta(seconds=12))
    rows[f"prompt check, 1 pipeline, {COST_STAGES} followed"] = _cost_row(*checks)
    opened.delete()
    checks = _time_checks(pipelines, now + timedelta(seconds=14))
    rows[f"prompt check, 1 pipeline, opens {COST_STAGES}"] = _cost_row(*checks)
    assert opened.count() == COST_PIPELINES * COST_STAGES
    return rows


def _cost_row(samples: list[float], queries: int | None) -> dict[str, Any]:
    return {
        "passes": len(samples),
        "p50_ms": round(percentile(samples, 50), 1),
        "p95_ms": round(percentile(samples, 95), 1),
        "max_ms": round(max(samples), 1),
        "queries": queries if queries is not None else "-",
    }


def _latency_row(latencies: list[float]) -> dict[str, Any]:
    missed = sum(1 for value in latencies if value == float("inf"))
    found = [value for value in latencies if value != float("inf")]
    return {
        "steps": len(latencies),
        "missed": missed,
        "p50_s": round(percentile(found, 50), 1),
        "p95_s": round(percentile(latencies, 95), 1) if not missed else "inf",
        "max_s": round(max(latencies), 1),
    }


def run() -> None:
    from apps.rollups.services.evaluation import PROMPT_CHECK_INTERVAL_S
    from tests.builders.configuration import make_team, make_user

    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        team = make_team("bench", owner=make_user("bench"))
        # The cost first, while its pipelines are the only ones: a tick evaluates every
        # pipeline, the detection runs' too. Theirs run on a virtual clock months
        # earlier, where these pipelines have no rollups to break a budget.
        cost = _cost_rows(team)
        started = time.perf_counter()
        latency = {
            f"analyzed {when}{'' if prompt else ', regular evaluation only'}": _latency_row(
                _detect(run, STEPS, delay_s, settle_s, seed, prompt=prompt)
            )
            for run, (when, delay_s, settle_s, seed, prompt) in enumerate(DETECTION_RUNS, 1)
        }
        simulated_s = round(time.perf_counter() - started, 1)
        print_rows(
            "Step change to open violation (virtual time; goal p95 <= 30 s)",
            latency,
            ["steps", "missed", "p50_s", "p95_s", "max_s"],
        )
        print_rows(
            f"Evaluation cost, {COST_PIPELINES} pipelines x {COST_STAGES} stages",
            cost,
            ["passes", "p50_ms", "p95_ms", "max_ms", "queries"],
        )
        path = write(
            "evaluation",
            {**latency, **cost},
            {
                "traces_per_s_per_pipeline": RATE,
                "window_s": 300,
                "rollup_every_s": ROLLUP_EVERY_S,
                "rollup_settle_s": ROLLUP_SETTLE_S,
                "rollup_after_finalize": True,
                "evaluate_every_s": EVALUATE_EVERY_S,
                "prompt_check": "after each rollup pass, once per pipeline per "
                f"{PROMPT_CHECK_INTERVAL_S} s at most",
                "retrieval_ms_before_after": [150, 600],
                "budget": "retrieval p95 350 ms",
                "cost_pipelines": COST_PIPELINES,
                "cost_stages": COST_STAGES,
                "simulation_wall_s": simulated_s,
            },
        )
        print(f"\nwritten {path}")
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)
