"""The back-test: predict each simulator switch from traffic sent without it, then send
traffic with it and compare the end-to-end percentiles (docs/whatif.md)."""

import time
from dataclasses import dataclass

from apps.core.percentiles import QUANTILES
from apps.core.time import NS_PER_MS, NS_PER_S
from apps.demo.traffic import Switches
from apps.ingest.models import ANALYZED_STATES, Trace
from apps.pipelines.models import Pipeline
from apps.whatif.changes import Change
from apps.whatif.params import replay_params
from apps.whatif.selectors.compute import whatif_replay_result
from tests.builders.configuration import make_team, make_user
from tests.builders.demo_traffic import rag_pipeline, send_traffic

SWITCHES: dict[str, tuple[Switches, list[Change]]] = {
    "history and rewrite concurrent": (
        Switches(concurrent_history_rewrite=True),
        [Change("history", "parallel", with_stage="rewrite")],
    ),
    "rerank skipped": (Switches(skip_rerank=True), [Change("rerank", "remove")]),
    "retrieval cache, 40 % hits": (
        Switches(retrieval_cache_hit_ratio=0.4),
        [Change("retrieval", "cache", hit_ratio=0.4, hit_ms=15)],
    ),
    "generation 20 % faster": (
        Switches(generation_speedup=0.2),
        [Change("generation", "scale", factor=0.8)],
    ),
}
SHOWN = ("p50", "p95", "p99")


@dataclass
class Arm:
    name: str
    predicted: dict[str, float]
    observed: dict[str, float]

    def error_pct(self, percentile: str) -> float:
        observed = self.observed[percentile]
        return round((self.predicted[percentile] - observed) / observed * 100, 2)


def _pipeline(slug: str) -> Pipeline:
    team = make_team(slug, owner=make_user(f"{slug}-owner"))
    return rag_pipeline(team)


def _observed(pipeline: Pipeline) -> dict[str, float]:
    rows = Trace.objects.filter(pipeline=pipeline, state__in=ANALYZED_STATES, incomplete=False)
    bounds = rows.values_list("start_ns", "end_ns")
    e2e = sorted((end - start) / NS_PER_MS for start, end in bounds if start and end)
    return {p: e2e[max(int(-(-QUANTILES[p] * len(e2e) // 1)), 1) - 1] for p in SHOWN}


@dataclass
class Backtest:
    baseline: dict[str, float]  # observed without any switch
    arms: list[Arm]


def backtest(*, traces: int, seed: int, paired: bool) -> Backtest:
    """One baseline, then each switch: with ``paired`` the switched traffic has the
    baseline's seed (each request draws the same step times, so the comparison is of the
    model alone), otherwise a seed of its own (sampling noise included)."""
    baseline = _pipeline(f"base-{seed}-{int(paired)}")
    end_ns = time.time_ns() - 30 * NS_PER_S
    send_traffic(baseline.team, traces=traces, seed=seed, end_ns=end_ns)
    window_start = (end_ns - traces * 100 * NS_PER_MS) // NS_PER_S - 600
    window = {"start": window_start, "end": end_ns // NS_PER_S + 60}
    arms = []
    for index, (name, (switches, changes)) in enumerate(SWITCHES.items()):
        params = replay_params(**window, traces=traces, percentile="p95", changes=changes)
        result = whatif_replay_result(pipeline=baseline, params=params)
        assert result["traces"] == traces, result["traces"]
        switched = _pipeline(f"arm-{seed}-{int(paired)}-{index}")
        arm_seed = seed if paired else seed + 1000 + index
        send_traffic(switched.team, traces=traces, seed=arm_seed, switches=switches, end_ns=end_ns)
        predicted = {p: result["after"]["e2e"][p] for p in SHOWN}
        arms.append(Arm(name, predicted, _observed(switched)))
    return Backtest(_observed(baseline), arms)
