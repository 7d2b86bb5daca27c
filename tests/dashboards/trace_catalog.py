"""Five traces of acme's, and one of globex's, whose every filter answer is known.

| trace | started | duration | pipeline | attributes (root; other spans) | status |
|---|---|---|---|---|---|
| health | 5 min ago | 5 ms | none (service edge) | user.id=42.0 | ok |
| fresh | 10 min ago | 2,500 ms | RAG chat | user.id=42; model gpt-4o-mini; retrieval 300 ms | ok |
| failed | 2 h ago | 3,000 ms | RAG chat | user.id="42"; model gpt-4o; retrieval 100 ms | error |
| cached | 26 h ago | 800 ms | RAG chat | user.id=7; model gpt-4o-mini, cache.hit=true | ok |
| listy | 3 days ago | 2,500 ms | RAG chat | user.id=[42]; model gpt-4o-mini, 300-char prompt | ok |

Globex's trace, a minute old, carries user.id=42 and gpt-4o-mini as well.
"""

from dataclasses import dataclass

from apps.ingest.models import Trace
from apps.pipelines.models import Pipeline
from apps.teams.models import Team
from tests.builders.ingested_traces import ingest, make_rag_pipeline, now_ns
from tests.builders.spans import HandSpan, span
from tests.conftest import TeamWorld
from tests.timing import MS

HEALTH, FRESH, FAILED, CACHED, LISTY, GLOBEX = 0xC4, 0xC1, 0xC2, 0xC3, 0xC5, 0xD9
MINUTE = 60_000 * MS
HOUR = 60 * MINUTE
LONG_PROMPT = "p" * 300


def _trace(
    trace_id: int,
    t0: int,
    duration_ms: int,
    *,
    user: object,
    model: str | None = None,
    retrieval_ms: int | None = None,
    extra: dict[str, object] | None = None,
    error: bool = False,
    root: str = "POST /chat",
    service: str = "chat-api",
) -> list[HandSpan]:
    end = t0 + duration_ms * MS
    spans = [
        span(0x10, None, t0, end, name=root, kind="server", service=service,
             attributes={"user.id": user}, trace_id=trace_id),
    ]  # fmt: skip
    if model is not None:
        spans.append(
            span(0x40, 0x10, t0 + 10 * MS, end - MS, name=f"chat {model}", kind="client",
                 service=service, status="error" if error else "unset", trace_id=trace_id,
                 attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": model,
                             **(extra or {})})
        )  # fmt: skip
    if retrieval_ms is not None:
        spans.append(
            span(0x30, 0x10, t0 + MS, t0 + (1 + retrieval_ms) * MS, name="vector.search",
                 service=service, trace_id=trace_id)
        )  # fmt: skip
    return spans


@dataclass
class Catalog:
    world: TeamWorld
    pipeline: Pipeline
    health: Trace
    fresh: Trace
    failed: Trace
    cached: Trace
    listy: Trace
    theirs: Trace

    def named(self, *names: str) -> list[str]:
        return [bytes(getattr(self, name).trace_id).hex() for name in names]


def build_catalog(world: TeamWorld) -> Catalog:
    pipeline = make_rag_pipeline(world.team)  # retrieval's budget: 200 ms
    now = now_ns()
    ingest(
        world.team,
        _trace(HEALTH, now - 5 * MINUTE, 5, user=42.0, root="GET /health", service="edge"),
        _trace(FRESH, now - 10 * MINUTE, 2500, user=42, model="gpt-4o-mini", retrieval_ms=300),
        _trace(FAILED, now - 2 * HOUR, 3000, user="42", model="gpt-4o", retrieval_ms=100,
               error=True),
        _trace(CACHED, now - 26 * HOUR, 800, user=7, model="gpt-4o-mini",
               extra={"cache.hit": True}),
        _trace(LISTY, now - 72 * HOUR, 2500, user=[42], model="gpt-4o-mini",
               extra={"prompt": LONG_PROMPT}),
    )  # fmt: skip
    ingest(world.other_team, _trace(GLOBEX, now - MINUTE, 100, user=42, model="gpt-4o-mini"))

    def get(team: Team, trace_id: int) -> Trace:
        return Trace.objects.get(team=team, trace_id=trace_id.to_bytes(16, "big"))

    health, fresh, failed, cached, listy = (
        get(world.team, t) for t in (HEALTH, FRESH, FAILED, CACHED, LISTY)
    )
    return Catalog(
        world, pipeline, health, fresh, failed, cached, listy, get(world.other_team, GLOBEX)
    )
