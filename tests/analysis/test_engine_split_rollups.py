"""Known answers through ingest, analysis and rollups: vLLM's timings on the engine's spans
give gateway, queue, prefill and decode stages whose percentiles are the exact ones within
the sketches' 1 %, and whose critical-path shares add up to the LLM call's."""

from dataclasses import dataclass

import numpy as np
import pytest
from django.utils import timezone

from apps.analysis.engine_timing import (
    ENGINE_E2E,
    ENGINE_FIRST_TOKEN,
    TIME_IN_DECODE,
    TIME_IN_PREFILL,
    TIME_IN_QUEUE,
)
from apps.pipelines.models import Pipeline
from apps.rollups.selectors import pipeline_percentiles
from apps.teams.models import Team
from tests.builders.bucket_rows import nearest_rank
from tests.builders.configuration import make_pipeline, make_rule, make_stage
from tests.builders.ingested_traces import ingest_and_roll_up
from tests.builders.spans import HandSpan, span
from tests.conftest import TeamWorld
from tests.timing import MS, S

pytestmark = pytest.mark.django_db
QUANTILES = {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99}
ENGINE_STAGES = ("gateway", "queue", "prefill", "decode")


def engine_pipeline(team: Team) -> Pipeline:
    pipeline = make_pipeline(
        team, "vllm-chat", name="vLLM chat", match_service="chat-api", match_root_span="POST /chat"
    )
    for slug in ENGINE_STAGES:
        make_rule(make_stage(pipeline, slug), span_name="llm_request", portion=slug)
    # Spans without the engine's timings: the plain split at the first token.
    make_rule(make_stage(pipeline, "ttft"), span_name="llm_request", portion="until_first_token")
    make_rule(
        make_stage(pipeline, "generation"), span_name="llm_request", portion="after_first_token"
    )
    make_rule(make_stage(pipeline, "auth"), span_name="auth*")
    return pipeline


@dataclass
class Sent:
    spans: list[HandSpan]
    parts_ns: dict[str, list[int]]  # the engine's stages, per trace that has them
    llm_ns: int = 0  # the LLM spans' time, all on the critical path
    e2e_ns: int = 0
    start_s: int = 0
    end_s: int = 0


def traffic(n: int, *, seed: int = 31) -> Sent:
    """``n`` requests: auth, then the engine's span; one in ten without the engine's
    timings (its first token as ``gen_ai.response.time_to_first_chunk``)."""
    rng = np.random.default_rng(seed)
    now_s = int(timezone.now().timestamp())
    starts = sorted(int(s) for s in rng.integers((now_s - 1800) * S, (now_s - 600) * S, n))
    sent = Sent([], {slug: [] for slug in ENGINE_STAGES})
    for index, t0 in enumerate(starts):
        t0 = t0 // MS * MS
        trace_id = 0xE000 + index
        auth = int(rng.uniform(2, 20) * MS)
        queue = int(rng.lognormal(np.log(30), 0.9) * MS)
        prefill = int(rng.lognormal(np.log(120), 0.4) * MS)
        scheduling = int(rng.uniform(0.5, 5) * MS)
        decode = int(rng.lognormal(np.log(800), 0.3) * MS)
        first_token = queue + prefill + scheduling
        llm_start = t0 + auth
        llm_end = llm_start + first_token + decode
        end = llm_end + int(rng.uniform(1, 10) * MS)
        if index % 10 == 9:
            attributes = {"gen_ai.response.time_to_first_chunk": first_token / S}
        else:
            attributes = {
                TIME_IN_QUEUE: queue / S,
                TIME_IN_PREFILL: prefill / S,
                TIME_IN_DECODE: decode / S,
                ENGINE_FIRST_TOKEN: first_token / S,
                ENGINE_E2E: (first_token + decode) / S,
            }
            for slug, value in zip(
                ENGINE_STAGES, (scheduling, queue, prefill, decode), strict=True
            ):
                sent.parts_ns[slug].append(value)
        sent.spans += [
            span(1, None, t0, end, name="POST /chat", kind="server", trace_id=trace_id),
            span(2, 1, t0, t0 + auth, name="auth.check", trace_id=trace_id),
            span(3, 1, llm_start, llm_end, name="llm_request", kind="server",
                 attributes=attributes, trace_id=trace_id),
        ]  # fmt: skip
        sent.llm_ns += llm_end - llm_start
        sent.e2e_ns += end - t0
    sent.start_s = starts[0] // S // 10 * 10
    sent.end_s = (starts[-1] // S // 10 + 2) * 10
    return sent


def test_engine_parts_are_exact_within_one_percent_and_add_up_to_the_llm_call(
    world: TeamWorld,
) -> None:
    pipeline = engine_pipeline(world.team)
    sent = traffic(400)
    ingest_and_roll_up(world.team, sent.spans)

    figures = pipeline_percentiles(pipeline=pipeline, start=sent.start_s, end=sent.end_s)
    by_slug = {row.stage.slug: row for row in figures.stages}
    assert figures.e2e.count == 400
    for slug in ENGINE_STAGES:
        row = by_slug[slug]
        values_ms = [value / MS for value in sent.parts_ns[slug]]
        assert row.wall.count == len(values_ms) == 360
        for name, q in QUANTILES.items():
            exact = nearest_rank(values_ms, q)
            got = row.wall.sketch.quantile(q)
            assert got is not None
            assert abs(got - exact) <= 0.01 * exact, (slug, name, got, exact)
        # On the critical path alone: the stage's critical time is its wall time.
        assert row.critical.sum_ns == sum(sent.parts_ns[slug])
    assert by_slug["ttft"].wall.count == by_slug["generation"].wall.count == 40

    llm_slugs = (*ENGINE_STAGES, "ttft", "generation")
    llm_critical = sum(by_slug[slug].critical.sum_ns for slug in llm_slugs)
    assert llm_critical == sent.llm_ns
    shares = sum(by_slug[slug].share or 0 for slug in llm_slugs)
    assert shares == pytest.approx(sent.llm_ns / sent.e2e_ns, abs=6e-6)
    everything = shares + (by_slug["auth"].share or 0) + (figures.untracked_share or 0)
    assert everything == pytest.approx(1, abs=1e-5)
