"""A team with known traffic for the /metrics tests: rollups written from hand-made
traces at times relative to now, so that each window's exact answer is known.

Traces fall in three bands that stay inside or outside each window for minutes,
whatever second the test runs at: the last five minutes, the rest of the last hour,
and two days ago (only in the counts since the pipeline began).
"""

import time
from dataclasses import dataclass, field
from datetime import timedelta

import numpy as np
from django.utils import timezone

from apps.pipelines.models import Pipeline, Stage
from apps.rollups.models import Violation
from apps.rollups.sketches.ddsketch import Sketch
from apps.teams.models import Team
from apps.teams.services import metrics_token_create
from tests.builders.bucket_rows import HandTrace, store_rollups
from tests.builders.configuration import make_pipeline, make_stage
from tests.conftest import TeamWorld
from tests.timing import DAY_S, MS

OBJECTIVE_MS = 1600
QUANTILES = {"0.5": 0.5, "0.9": 0.9, "0.95": 0.95, "0.99": 0.99}


@dataclass
class MetricsWorld:
    world: TeamWorld
    pipeline: Pipeline
    retrieval: Stage
    generation: Stage
    rerank: Stage  # budgeted, never seen in a trace
    quiet: Pipeline  # no traffic at all
    other_pipeline: Pipeline
    traces: list[HandTrace]
    other_traces: list[HandTrace]
    token: str
    other_token: str
    now: float = field(default_factory=time.time)

    @property
    def team(self) -> Team:
        return self.world.team

    def recent(self, seconds: int) -> list[HandTrace]:
        return [t for t in self.traces if t.start >= self.now - seconds]


def hand_traces(
    starts: list[int], *, retrieval: Stage | None, generation: Stage | None, seed: int
) -> list[HandTrace]:
    rng = np.random.default_rng(seed)
    traces = []
    for index, start in enumerate(starts):
        retrieval_ns = int(rng.lognormal(np.log(250), 0.5) * MS)
        generation_ns = int(rng.lognormal(np.log(1100), 0.2) * MS)
        untracked_ns = int(rng.uniform(5, 40) * MS)
        stages = {}
        if retrieval is not None:
            stages[retrieval.pk] = (retrieval_ns + 2 * MS, retrieval_ns)
        if generation is not None:
            stages[generation.pk] = (generation_ns, generation_ns)
        traces.append(
            HandTrace(
                start=start,
                e2e_ns=retrieval_ns + generation_ns + untracked_ns,
                stages=stages,
                error=index % 13 == 0,
            )
        )
    return traces


def build_metrics_world(world: TeamWorld) -> MetricsWorld:
    pipeline = make_pipeline(
        world.team,
        "rag-chat",
        # Quotes, a backslash and a line break: label values the format must escape.
        name='RAG "chat" \\ answer\nv2',
        budget={"p95": 2500, "p99": 4000},
        objective_target=99,
        objective_threshold_ms=OBJECTIVE_MS,
    )
    retrieval = make_stage(pipeline, "retrieval", name="Retrieval", budget_ms=400)
    generation = make_stage(
        pipeline, "generation", name="Generation", budget_ms=1500, budget_percentile="p99"
    )
    rerank = make_stage(pipeline, "rerank", name="Rerank", budget_ms=80)
    quiet = make_pipeline(
        world.team, "batch-summaries", name="Batch summaries", budget={"p50": 900}
    )
    other = make_pipeline(world.other_team, "rag-chat", name="Globex chat", budget={"p95": 900})
    other_stage = make_stage(other, "retrieval", budget_ms=50)

    now = time.time()
    at = int(now)
    rng = np.random.default_rng(7)
    recent = rng.integers(at - 240, at - 30, 180)
    hour = rng.integers(at - 3300, at - 420, 420)
    old = rng.integers(at - 2 * DAY_S - 3000, at - 2 * DAY_S, 150)
    starts = sorted(int(s) for s in np.concatenate([recent, hour, old]))
    traces = hand_traces(starts, retrieval=retrieval, generation=generation, seed=3)
    store_rollups(pipeline, traces, objective_ns=OBJECTIVE_MS * MS)
    # The other team's pipeline of the same slug, slower, with traffic of its own.
    other_traces = hand_traces(starts[::3], retrieval=other_stage, generation=None, seed=9)
    for trace in other_traces:
        trace.e2e_ns *= 3
    store_rollups(other, other_traces)

    opened = timezone.now() - timedelta(minutes=3)
    violation = {"team": world.team, "pipeline": pipeline, "window_s": 300, "sample_count": 50}
    Violation.objects.create(
        **violation, stage=retrieval, percentile="p95", budget_ms=400, observed_ms=480,
        peak_ms=510, opened_at=opened, last_evaluated_at=opened,
    )  # fmt: skip
    Violation.objects.create(
        **violation, stage=None, percentile="p99", budget_ms=4000, observed_ms=4100,
        peak_ms=4200, opened_at=opened - timedelta(hours=2), last_evaluated_at=opened,
        closed_at=opened - timedelta(hours=1),
    )  # fmt: skip
    _, token = metrics_token_create(team=world.team, name="prometheus", created_by=world.owner)
    _, other_token = metrics_token_create(
        team=world.other_team, name="prometheus", created_by=world.outsider
    )
    return MetricsWorld(
        world=world,
        pipeline=pipeline,
        retrieval=retrieval,
        generation=generation,
        rerank=rerank,
        quiet=quiet,
        other_pipeline=other,
        traces=traces,
        other_traces=other_traces,
        token=token,
        other_token=other_token,
        now=now,
    )


def sketch_seconds(values_ns: list[int], q: float) -> float:
    """What the scrape gives for these values: the sketch's percentile to 0.1 ms, in s."""
    sketch = Sketch.from_values(np.asarray(values_ns, dtype=np.float64) / MS)
    return round(round(sketch.quantile(q) or 0, 1) / 1000, 7)
