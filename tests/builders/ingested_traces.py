"""Traces sent through the real ingest path: stored batch, drain, finalization."""

import time
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

import numpy as np
from django.utils import timezone

from apps.analysis.services.finalize import traces_finalize_due
from apps.ingest.models import Encoding, Trace
from apps.ingest.services.batches import raw_batch_store, raw_batches_drain
from apps.pipelines.models import Pipeline
from apps.rollups.services.bucket_pass import rollups_process_dirty
from apps.teams.models import Team
from tests.builders.bucket_rows import HandTrace
from tests.builders.configuration import make_pipeline, make_rule, make_stage
from tests.builders.spans import ROOT, HandSpan, encode, rag_spans, span
from tests.conftest import TeamWorld
from tests.timing import HOUR, MS

if TYPE_CHECKING:
    from tests.builders.api import ApiWorld


def now_ns() -> int:
    return time.time_ns() // MS * MS


def single_span(
    trace_id: int,
    t0: int,
    *,
    name: str,
    service: str = "chat-api",
    duration_ms: int = 10,
    error: bool = False,
) -> list[HandSpan]:
    """A trace of one server span, on a resource that names its service and no more."""
    return [
        span(
            ROOT,
            None,
            t0,
            t0 + duration_ms * MS,
            name=name,
            kind="server",
            service=service,
            resource={},
            status="error" if error else "unset",
            trace_id=trace_id,
        )
    ]


def ingest(team: Team, *traces: list[HandSpan]) -> None:
    for spans in traces:
        raw_batch_store(
            team=team, token=None, encoding=Encoding.OTLP_PROTOBUF, body=encode(spans),
            span_count=len(spans),
        )  # fmt: skip
    raw_batches_drain()
    traces_finalize_due(now=timezone.now() + timedelta(hours=1))


def ingest_and_roll_up(team: Team, spans: list[HandSpan]) -> None:
    """Spans of many traces as one request, drained, analysed final and rolled up."""
    ingest(team, spans)
    while rollups_process_dirty().buckets:
        pass


def make_rag_pipeline(team: Team) -> Pipeline:
    pipeline = make_pipeline(
        team, "rag-chat", name="RAG chat", match_service="chat-api", match_root_span="POST /chat"
    )
    make_rule(make_stage(pipeline, "auth", budget_ms=100), span_name="auth*")
    make_rule(make_stage(pipeline, "retrieval", budget_ms=200), span_name="vector.search*")
    make_rule(
        make_stage(pipeline, "ttft", budget_ms=300),
        attributes={"gen_ai.operation.name": "chat"},
        portion="until_first_token",
    )
    make_rule(
        make_stage(pipeline, "generation", budget_ms=None),
        attributes={"gen_ai.operation.name": "chat"},
        portion="after_first_token",
    )
    return pipeline


def hex_of(trace_id: int) -> str:
    return trace_id.to_bytes(16, "big").hex()


@dataclass
class Explorer:
    """acme's traces, newest first, plus one of globex's.

    ok (1 h ago, RAG), errored (2 h, RAG), health (30 min, unmatched 10 ms),
    health_old (3 h, unmatched 30 ms), batch (4 h, unmatched, error, 500 ms),
    orphans (5 h, no root: incomplete and unmatched), stale (30 h, unmatched 20 ms).
    """

    world: TeamWorld
    pipeline: Pipeline
    ok: Trace
    errored: Trace
    health: Trace
    health_old: Trace
    batch: Trace
    orphans: Trace
    stale: Trace
    theirs: Trace

    def newest_first(self) -> list[Trace]:
        return [self.health, self.ok, self.errored, self.health_old, self.batch, self.orphans,
                self.stale]  # fmt: skip


OK, ERRORED, HEALTH, HEALTH_OLD, BATCH, ORPHANS, STALE, THEIRS = (
    0xA1, 0xA2, 0xA3, 0xA4, 0xA5, 0xA6, 0xA7, 0xB1,
)  # fmt: skip


def build_explorer(world: TeamWorld) -> Explorer:
    pipeline = make_rag_pipeline(world.team)
    now = now_ns()
    ingest(
        world.team,
        rag_spans(OK, now - HOUR),
        rag_spans(ERRORED, now - 2 * HOUR, llm_error=True),
        single_span(HEALTH, now - HOUR // 2, name="GET /health", duration_ms=10),
        single_span(HEALTH_OLD, now - 3 * HOUR, name="GET /health", duration_ms=30),
        single_span(BATCH, now - 4 * HOUR, name="POST /batch", service="batch-worker",
                    duration_ms=500, error=True),
        rag_spans(ORPHANS, now - 5 * HOUR)[1:],
        single_span(STALE, now - 30 * HOUR, name="GET /health", duration_ms=20),
    )  # fmt: skip
    ingest(world.other_team, single_span(THEIRS, now - HOUR, name="GET /globex"))

    def get(team: Team, trace_id: int) -> Trace:
        return Trace.objects.select_related("pipeline").get(
            team=team, trace_id=trace_id.to_bytes(16, "big")
        )

    ok, errored, health, health_old, batch, orphans, stale = (
        get(world.team, t) for t in (OK, ERRORED, HEALTH, HEALTH_OLD, BATCH, ORPHANS, STALE)
    )
    return Explorer(
        world, pipeline, ok, errored, health, health_old, batch, orphans, stale,
        theirs=get(world.other_team, THEIRS),
    )  # fmt: skip


def retrieval_generation_traces(
    api: "ApiWorld",
    starts: list[int],
    rng: np.random.Generator,
    *,
    retrieval_ms: float,
    retrieval_sigma: float,
    overhead_ms: int,
    error_every: int = 0,
) -> list[HandTrace]:
    """Hand-made traces of the API world's pipeline: a lognormal retrieval, then a
    generation of about 900 ms, then ``overhead_ms`` outside both stages; every
    ``error_every``-th trace failed."""
    traces = []
    for index, start in enumerate(starts):
        retrieval = int(rng.lognormal(np.log(retrieval_ms), retrieval_sigma) * MS)
        generation = int(rng.lognormal(np.log(900), 0.2) * MS)
        traces.append(
            HandTrace(
                start=start,
                e2e_ns=retrieval + generation + overhead_ms * MS,
                stages={
                    api.retrieval.pk: (retrieval, retrieval),
                    api.generation.pk: (generation, generation),
                },
                error=bool(error_every) and index % error_every == 0,
            )
        )
    return traces


# A trace whose tool span carries a long value, an array, a number and an event with
# attributes; and a span of globex's whose id is in no trace of acme's.
DETAILED, THEIRS_DETAILED = 0xD1, 0xD2
TOOL, GLOBEX_SPAN = 0x50, 0x77
LONG_CHARS = 6000


@dataclass
class Detailed:
    world: TeamWorld
    trace_hex: str
    theirs_hex: str
    long_value: str  # "00000 00001 …": any cut shows where it fell


def build_detailed(world: TeamWorld) -> Detailed:
    make_rag_pipeline(world.team)
    t0 = now_ns() - HOUR
    long_value = "".join(f"{i:05d} " for i in range(LONG_CHARS // 6))
    tool = span(
        TOOL, ROOT, t0 + 10 * MS, t0 + 40 * MS, name="tool.call", trace_id=DETAILED,
        attributes={"tool.input": long_value, "tool.args": ["a", "b"], "tool.retries": 2},
        events=[("retry", t0 + 20 * MS, {"reason": "timeout", "payload": long_value})],
    )  # fmt: skip
    ingest(world.team, [*rag_spans(DETAILED, t0), tool])
    theirs = span(
        GLOBEX_SPAN, None, t0, t0 + 5 * MS, name="GET /globex", kind="server",
        attributes={"globex.note": "only globex may read this"}, trace_id=THEIRS_DETAILED,
    )  # fmt: skip
    ingest(world.other_team, [theirs])
    return Detailed(world, hex_of(DETAILED), hex_of(THEIRS_DETAILED), long_value)
