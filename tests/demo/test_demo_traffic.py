"""The demo's traffic against the demo's budgets: healthy, with rerank drifting now and then.

Half an hour of `make run`'s traffic (5 traces a second, rerank drifting) is planned,
matched to the demo's stages by the real attribution, and judged as the budget
evaluation judges it: each stage's p95 over a sliding five-minute window every 10 s,
a violation opening over budget and closing after three evaluations back under.
Rerank's violation opens in each drift and closes before the next; nothing else ever
violates, end to end included, and the objective burns well under its allowed rate.
"""

import io
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from apps.analysis.attribution import attribute_trace
from apps.analysis.spans import Span
from apps.analysis.stage_matching import StageMatcher, stage_specs_from_pipeline
from apps.demo.traffic import Drift, TracePlanner, shape_for_pipeline
from apps.demo.traffic.traffic_plan import TracePlan
from apps.pipelines.config_as_code import config_apply, parse_document
from apps.pipelines.environment import COMMAND_LINE
from apps.pipelines.models import Pipeline

RPS = 5
RUN_S = 30 * 60
TICK_S = 10
NS_PER_MS = 1_000_000
# As simulate_traffic's defaults and the Procfile's `--drift rerank`.
DEMO_DRIFT = Drift(step="rerank")


@pytest.fixture
def demo(db: None) -> Pipeline:
    text = (Path(settings.BASE_DIR) / "demo" / "budgets.yaml").read_text()
    config_apply(document=parse_document(text, environment=COMMAND_LINE), create_team=True)
    return Pipeline.objects.prefetch_related("stages__rules").get(team__slug="demo")


def stage_budgets(pipeline: Pipeline, *, parts: bool = True) -> dict[str, int]:
    """Each stage's p95 budget: the demo gives every stage one but the parts of the model's
    time that it only shows (network and gateway, decode); ``parts``: with the budgeted
    parts (engine queue, prefill), which lie within the first token's stage."""
    budgets = {}
    for stage in pipeline.stages.all():
        if stage.engine_part and (not parts or stage.budget_ms is None):
            continue
        assert stage.budget_ms is not None
        assert stage.budget_percentile == "p95"
        budgets[stage.slug] = stage.budget_ms
    return budgets


def analysis_spans(plan: TracePlan, service: str) -> list[Span]:
    def ns(offset_ms: float) -> int:
        return round(offset_ms * NS_PER_MS)

    return [
        Span(
            span_id=str(planned.index),
            parent_id=None if planned.parent is None else str(planned.parent),
            name=planned.name,
            service=service,
            kind=planned.kind.name,
            start_ns=ns(planned.start_ms),
            end_ns=ns(planned.end_ms),
            attributes=dict(planned.attributes),
            events=tuple((name, ns(offset)) for name, offset, _ in planned.events),
            status_error=planned.error is not None,
        )
        for planned in plan.spans
    ]


@dataclass
class Timeline:
    """Per trace: when it started (s into the run), its end-to-end and stage wall times."""

    at_s: np.ndarray
    e2e_ms: np.ndarray
    stage_ms: dict[str, np.ndarray]  # NaN where the trace has no span of the stage


def run(pipeline: Pipeline, *, drift: Drift | None, seconds: int, seed: int = 3) -> Timeline:
    shape = shape_for_pipeline(pipeline=pipeline)
    planner = TracePlanner(rng=random.Random(seed), shape=shape, drift=drift)
    matcher = StageMatcher(stage_specs_from_pipeline(pipeline))
    count = seconds * RPS
    at = np.arange(count) / RPS
    e2e = np.empty(count)
    stages = {slug: np.full(count, np.nan) for slug in matcher.stage_slugs}
    for number in range(count):
        plan = planner.plan(elapsed_s=float(at[number]))
        result = attribute_trace(analysis_spans(plan, shape.service), matcher)
        e2e[number] = result.e2e_ns / NS_PER_MS
        for slug, part in result.stages.items():
            stages[slug][number] = part.wall_ns / NS_PER_MS
    return Timeline(at, e2e, stages)


def p95(values: np.ndarray) -> float:
    present = values[~np.isnan(values)]
    return float(np.percentile(present, 95, method="inverted_cdf"))


def violations(
    timeline: Timeline, values: np.ndarray, budget: float, *, window_s: int, close_after: int
) -> list[tuple[int, int]]:
    """(opened, closed) times, in seconds into the run, of the scope's violations."""
    found: list[tuple[int, int]] = []
    opened: int | None = None
    under = 0
    for end in range(window_s, RUN_S + TICK_S, TICK_S):
        inside = (timeline.at_s >= end - window_s) & (timeline.at_s < end)
        over = p95(values[inside]) > budget
        if opened is None and over:
            opened, under = end, 0
        elif opened is not None:
            under = 0 if over else under + 1
            if under >= close_after:
                found.append((opened, end))
                opened = None
    if opened is not None:
        found.append((opened, RUN_S))
    return found


def test_without_a_drift_every_stage_holds_its_p95_with_room(demo: Pipeline) -> None:
    timeline = run(demo, drift=None, seconds=600)
    budgets = stage_budgets(demo)
    for slug, budget in budgets.items():
        observed = p95(timeline.stage_ms[slug])
        assert observed <= 0.85 * budget, (slug, observed, budget)
    for percentile, budget in demo.budget.items():
        observed = float(np.percentile(timeline.e2e_ms, int(percentile[1:]), method="inverted_cdf"))
        assert observed <= 0.85 * budget, (percentile, observed, budget)
    # The stages share the end-to-end p95 budget, no more; the engine's parts lie within.
    assert sum(stage_budgets(demo, parts=False).values()) <= demo.budget["p95"]


def test_half_an_hour_of_demo_traffic_opens_and_closes_only_reranks_violations(
    demo: Pipeline,
) -> None:
    timeline = run(demo, drift=DEMO_DRIFT, seconds=RUN_S)
    window, close_after = demo.evaluation_window_s, demo.close_after

    seen = {
        slug: violations(
            timeline, timeline.stage_ms[slug], budget, window_s=window, close_after=close_after
        )
        for slug, budget in stage_budgets(demo).items()
    }
    for percentile, budget in demo.budget.items():
        values = timeline.e2e_ms
        for end in range(window, RUN_S + TICK_S, TICK_S):
            inside = values[(timeline.at_s >= end - window) & (timeline.at_s < end)]
            observed = float(np.percentile(inside, int(percentile[1:]), method="inverted_cdf"))
            assert observed <= budget, (percentile, end, observed)

    assert {slug: found for slug, found in seen.items() if found}.keys() == {"rerank"}
    drifts = [(300, 480), (1200, 1380)]  # 5:00-8:00 and 20:00-23:00 into the run
    assert len(seen["rerank"]) == len(drifts)
    for (opened, closed), (drift_start, drift_end) in zip(seen["rerank"], drifts, strict=True):
        # It opens within a minute of the drift, and closes once the slow traces have
        # left the window, well before the next drift.
        assert drift_start < opened <= drift_start + 60
        assert drift_end < closed <= drift_end + window + (close_after + 1) * TICK_S
        assert closed - opened >= 2 * 60  # past the demo rule's two minutes: it fires


def test_the_drift_is_over_budget_while_it_lasts(demo: Pipeline) -> None:
    timeline = run(demo, drift=Drift(step="rerank", first_s=0, length_s=120), seconds=120)
    budgets = stage_budgets(demo)
    assert p95(timeline.stage_ms["rerank"]) >= 1.3 * budgets["rerank"]
    assert p95(timeline.stage_ms["retrieval"]) <= budgets["retrieval"]


def test_the_objective_burns_well_under_its_allowed_rate(demo: Pipeline) -> None:
    timeline = run(demo, drift=DEMO_DRIFT, seconds=RUN_S)
    assert demo.objective_threshold_ms is not None
    assert demo.objective_target is not None
    bad = float(np.mean(timeline.e2e_ms > demo.objective_threshold_ms))
    allowed = 1 - float(demo.objective_target) / 100
    assert bad / allowed < 0.6


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"step": "teleport"}, "drifting step"),
        ({"step": "rerank", "factor": 0.5}, "factor"),
        ({"step": "rerank", "length_s": 900}, "lasts"),
        ({"step": "rerank", "first_s": -1}, "first drift"),
    ],
)
def test_a_drift_that_cannot_be_is_refused(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Drift(**fields)  # type: ignore[arg-type]


def test_the_drift_keeps_its_schedule() -> None:
    drift = Drift(step="rerank", every_s=900, length_s=180, first_s=300)
    assert [drift.active(s) for s in (0, 299, 300, 479, 480, 1199, 1200, 1379, 1380)] == [
        False, False, True, True, False, False, True, True, False,
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--drift", "rerank", "--drift-for", "2000"], "lasts"),
        (["--drift", "rerank", "--drift-factor", "0"], "factor"),
    ],
)
def test_the_command_refuses_a_drift_that_cannot_be(options: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        call_command(
            "simulate_traffic", "--team", "demo", "--pipeline", "rag-chat", *options,
            stdout=io.StringIO(),
        )  # fmt: skip


def test_the_command_refuses_an_unknown_step() -> None:
    with pytest.raises(CommandError, match="invalid choice"):
        call_command(
            "simulate_traffic", "--team", "demo", "--pipeline", "rag-chat", "--drift", "nap",
            stdout=io.StringIO(),
        )  # fmt: skip
