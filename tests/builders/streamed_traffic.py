"""Streamed LLM answers with known figures: two models, chunk events, now and then a stall."""

import itertools
from dataclasses import dataclass, field

import numpy as np
from django.utils import timezone

from apps.pipelines.models import Pipeline
from apps.teams.models import Team
from tests.builders.configuration import make_pipeline, make_rule, make_stage
from tests.builders.spans import HandSpan, span
from tests.timing import MS, S

CHUNK = "llm.content.completion.chunk"


@dataclass
class Sent:
    spans: list[HandSpan] = field(default_factory=list)
    # Per trace: (model, wall of generation ns, tpot ns, tokens/s, max gap ns)
    rows: list[tuple[str, int, float, float, int]] = field(default_factory=list)
    start_s: int = 0
    end_s: int = 0


def streamed_traffic(n: int, *, seed: int = 8, ago_s: tuple[int, int] = (1500, 600)) -> Sent:
    """``n`` streamed answers starting between ``ago_s`` (older, newer) seconds ago."""
    rng = np.random.default_rng(seed)
    now_s = int(timezone.now().timestamp())
    older, newer = ago_s
    starts = sorted(int(s) for s in rng.integers((now_s - older) * S, (now_s - newer) * S, n))
    sent = Sent()
    for index, t0 in enumerate(starts):
        t0 = t0 // MS * MS
        trace_id = 0x5000 + index
        model = "small" if rng.random() < 0.15 else "large"
        first = int(rng.lognormal(np.log(300), 0.4) * MS)
        tokens = int(rng.integers(20, 400))
        gaps = rng.lognormal(np.log(30 if model == "large" else 15), 0.3, size=max(tokens // 8, 2))
        if rng.random() < 0.05:
            gaps[rng.integers(1, len(gaps))] += rng.uniform(400, 900)
        chunk_times = t0 + first + np.rint(np.cumsum(gaps) * MS).astype(np.int64)
        end = int(chunk_times[-1])
        events = [("first_token", t0 + first), (CHUNK, t0 + first)]
        events += [(CHUNK, int(time)) for time in chunk_times]
        sent.spans += [
            span(1, None, t0, end + 5 * MS, name="POST /chat", kind="server", trace_id=trace_id),
            span(2, 1, t0, end, name=f"chat {model}", kind="client", trace_id=trace_id,
                 attributes={"gen_ai.request.model": model, "gen_ai.provider.name": "vllm",
                             "gen_ai.usage.output_tokens": tokens},
                 events=events),
        ]  # fmt: skip
        generation = end - (t0 + first)
        times = [t0 + first, *chunk_times.tolist()]
        max_gap = max(b - a for a, b in itertools.pairwise(times))
        sent.rows.append(
            (model, generation, generation / (tokens - 1), tokens / (generation / S), max_gap)
        )
    sent.start_s = starts[0] // S // 10 * 10
    sent.end_s = (starts[-1] // S // 10 + 2) * 10
    return sent


def streaming_pipeline(team: Team) -> Pipeline:
    """Time to first token and generation, with budgets (a minute end to end, none per
    stage) that the traffic above never breaks: only stream budgets set on it can."""
    pipeline = make_pipeline(
        team, "streamed", name="Streamed", match_root_span="POST /chat", budget={"p95": 60_000}
    )
    ttft = make_stage(pipeline, "ttft", budget_ms=None)
    make_rule(ttft, span_name="chat*", portion="until_first_token")
    generation = make_stage(pipeline, "generation", budget_ms=None)
    make_rule(generation, span_name="chat*", portion="after_first_token")
    return pipeline
