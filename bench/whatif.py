"""What-if: the cost of a replay and of the lever finder, and the back-test's accuracy.

Cost. 2,000 simulator requests (12 to 14 spans each: the RAG chat pipeline of
demo/budgets.yaml with a tool stage) are modelled once, then replayed under the
issue's five-change scenario (rerank removed, history concurrent with rewrite, a
retrieval cache of 40 % hits at 20 ms, generation 20 % faster, tools capped at
500 ms) ``BENCH_WHATIF_RUNS`` times, with the per-stage figures and the bootstrap
intervals; the lever finder likewise. Then the same on stored traces, as a worker runs
a run: the sample read from PostgreSQL, modelled, replayed before and after, and
summarized (``whatif_replay_result``, ``whatif_levers_result``). Wall and CPU time of
this process; PostgreSQL's own time is in the wall time only.

Back-test. For each simulator switch, the end-to-end p50/p95/p99 predicted from
``BENCH_WHATIF_TRACES`` requests sent without it (through the OpenTelemetry SDK, the
official OTLP encoder, stored batches, the drain and the finalization, as in
production) against those of as many requests sent with it: paired (the same seed:
each request draws the same step times, so the difference is the model's) and
independent (another seed: sampling noise included).
"""

import os
import random
import time
from typing import Any

from django.db import connection
from django.test.utils import setup_test_environment

from apps.whatif.apis.runs import EXAMPLE_CHANGES
from bench.report import percentile, print_rows, write

RUNS = int(os.environ.get("BENCH_WHATIF_RUNS", "30"))
TRACES = 2000
BACKTEST_TRACES = int(os.environ.get("BENCH_WHATIF_TRACES", "20000"))
SEED = 23


def timed_runs(function: Any, runs: int) -> dict[str, Any]:
    walls, cpus = [], []
    for _ in range(runs):
        wall, cpu = time.perf_counter(), time.process_time()
        function()
        walls.append((time.perf_counter() - wall) * 1000)
        cpus.append((time.process_time() - cpu) * 1000)
    return {
        "runs": runs,
        "p50_ms": round(percentile(walls, 50), 1),
        "p95_ms": round(percentile(walls, 95), 1),
        "max_ms": round(max(walls), 1),
        "cpu_p50_ms": round(percentile(cpus, 50), 1),
    }


def _in_memory_rows() -> tuple[dict[str, dict[str, Any]], int]:
    """The engine alone, on simulator traces modelled without the database."""
    from apps.analysis.critical_path import find_root
    from apps.analysis.pipeline_routing import compile_pipeline
    from apps.analysis.spans import Span, unique_spans
    from apps.demo.traffic import TracePlanner, TraceShape
    from apps.pipelines.selectors import pipeline_with_stages
    from apps.whatif.changes import changes_from_data
    from apps.whatif.dependency import ModelRows, model_add_trace, stage_index
    from apps.whatif.levers import LeverStage, levers_find
    from apps.whatif.outcome import PipelineInfo, Resamples, StageInfo, side
    from apps.whatif.replay import replay, replay_model
    from apps.whatif.scenario import scenario_compile
    from tests.builders.configuration import make_team, make_user
    from tests.builders.demo_traffic import rag_pipeline

    pipeline = pipeline_with_stages(pipeline=rag_pipeline(make_team("mem", owner=make_user("m"))))
    stages = list(pipeline.stages.all())
    matcher = compile_pipeline(pipeline).matcher
    slugs = matcher.stage_slugs
    planner = TracePlanner(rng=random.Random(SEED), shape=TraceShape())
    traces = []
    for _ in range(TRACES):
        plan = planner.plan()
        base = 10**18
        traces.append([
            Span(f"{s.index + 1:016x}", None if s.parent is None else f"{s.parent + 1:016x}",
                 s.name, "chat-api", "internal", base + round(s.start_ms * 1e6),
                 base + round(s.end_ms * 1e6), dict(s.attributes),
                 tuple((n, base + round(o * 1e6)) for n, o, _ in s.events), s.error is not None)
            for s in plan.spans
        ])  # fmt: skip
    spans = sum(len(t) for t in traces)

    def build() -> Any:
        rows = ModelRows(stage_count=len(slugs))
        for key, trace in enumerate(traces):
            by_id = unique_spans(trace)
            matches = {span_id: matcher.match(s) for span_id, s in by_id.items()}
            model_add_trace(rows, key=key, by_id=by_id, root=find_root(by_id), matches=matches,
                            stages=stage_index(slugs))  # fmt: skip
        return replay_model(rows, slugs)

    model = build()
    by_slug = {stage.slug: stage for stage in stages}
    changes = changes_from_data(EXAMPLE_CHANGES, stages=by_slug)
    budgets = {stage.slug: stage.budget_ms for stage in stages}
    scenario = scenario_compile(changes, stage_slugs=slugs, budgets_ms=budgets)
    infos = [StageInfo(s.slug, s.name, s.budget) for s in stages]
    info = PipelineInfo(pipeline.budget, 99.0, 4000)

    def five_changes() -> None:
        result = replay(model, scenario)
        side(result, stages=infos, pipeline=info, errors=0, resamples=Resamples.draw(TRACES))

    lever_stages = [LeverStage(s.slug, s.name) for s in stages]
    rows = {
        "model 2,000 traces (in memory)": timed_runs(build, max(RUNS // 6, 3)),
        "replay, five changes": timed_runs(lambda: replay(model, scenario), RUNS),
        "replay + figures + bootstrap": timed_runs(five_changes, RUNS),
        "lever finder (in memory)": timed_runs(
            lambda: levers_find(model, stages=lever_stages), RUNS
        ),
    }
    return rows, spans


def _stored_rows() -> dict[str, dict[str, Any]]:
    """As a worker runs a run: the sample read from PostgreSQL, modelled, replayed."""
    from apps.whatif.changes import changes_from_data
    from apps.whatif.params import levers_params, replay_params, stages_by_slug
    from apps.whatif.selectors.compute import whatif_levers_result, whatif_replay_result
    from tests.builders.configuration import make_team, make_user
    from tests.builders.demo_traffic import rag_pipeline, send_traffic

    pipeline = rag_pipeline(make_team("stored", owner=make_user("s")))
    end_ns = time.time_ns() - 30 * 10**9
    send_traffic(pipeline.team, traces=TRACES, seed=SEED, end_ns=end_ns)
    window = {"start": end_ns // 10**9 - 3600, "end": end_ns // 10**9 + 60}
    changes = changes_from_data(EXAMPLE_CHANGES, stages=stages_by_slug(pipeline=pipeline))
    asked = replay_params(**window, traces=TRACES, percentile="p95", changes=changes)
    levers = levers_params(
        start=window["start"], end=window["end"], traces=TRACES, percentile="p95", hit_ratio=0.5
    )
    runs = max(RUNS // 3, 5)
    return {
        "run: replay, five changes (stored)": timed_runs(
            lambda: whatif_replay_result(pipeline=pipeline, params=asked), runs
        ),
        "run: lever finder (stored)": timed_runs(
            lambda: whatif_levers_result(pipeline=pipeline, params=levers), runs
        ),
    }


def _backtest_rows() -> dict[str, dict[str, Any]]:
    from tests.whatif.backtest import SHOWN, backtest

    rows: dict[str, dict[str, Any]] = {}
    for paired in (True, False):
        result = backtest(traces=BACKTEST_TRACES, seed=SEED, paired=paired)
        label = "paired" if paired else "independent"
        for arm in result.arms:
            row: dict[str, Any] = {}
            for p in SHOWN:
                row[f"{p}_predicted"] = round(arm.predicted[p])
                row[f"{p}_observed"] = round(arm.observed[p])
                row[f"{p}_error_pct"] = arm.error_pct(p)
            rows[f"{arm.name} ({label})"] = row
        rows[f"no switch ({label})"] = {f"{p}_observed": round(result.baseline[p]) for p in SHOWN}
    return rows


def run() -> None:
    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        memory, spans = _in_memory_rows()
        cost = {**memory, **_stored_rows()}
        print_rows(
            f"What-if cost: {TRACES:,} traces ({spans:,} spans); goals: replay p95 <= 1 s, "
            "levers <= 2 s",
            cost,
            ["runs", "p50_ms", "p95_ms", "max_ms", "cpu_p50_ms"],
        )
        accuracy = _backtest_rows()
        columns = [
            f"{p}_{k}"
            for p in ("p50", "p95", "p99")
            for k in ("predicted", "observed", "error_pct")
        ]
        print_rows(
            f"Back-test: predicted from traffic without the switch vs sent with it, "
            f"{BACKTEST_TRACES:,} requests each (ms; goal within 5 %)",
            accuracy,
            columns,
        )
        path = write(
            "whatif",
            {**cost, **accuracy},
            {
                "traces": TRACES,
                "spans": spans,
                "runs": RUNS,
                "backtest_traces": BACKTEST_TRACES,
                "changes": EXAMPLE_CHANGES,
                "cpu_count": os.cpu_count(),
                "load_average_end": os.getloadavg(),
            },
        )
        print(f"wrote {path}")
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)
