"""Trace shapes and plans: spans with offsets from the request start."""

import math
import random
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from opentelemetry.trace import SpanKind
from opentelemetry.util.types import AttributeValue

from apps.demo.traffic.llm_call import (
    CHUNK_EVENT,
    ENGINE_SPAN,
    FALLBACK_MODEL,
    FALLBACK_PROVIDER,
    FALLBACK_SHARE,
    PRIMARY_MODEL,
    PRIMARY_PROVIDER,
    EngineDraw,
    chunk_offsets,
    engine_draw,
)
from apps.pipelines.models import Pipeline

DEFAULT_SERVICE = "chat-api"
DEFAULT_ROOT_SPAN = "POST /chat"

# Median milliseconds and lognormal spread per step; the spread sets how long the tail is.
MEDIAN_MS = {
    "auth": 10.0,
    "history": 60.0,
    "rewrite": 150.0,
    "embedding": 40.0,
    "retrieval": 120.0,
    "rerank": 80.0,
    "tool": 200.0,
    "ttft": 450.0,
    "generation": 900.0,
}
SIGMA = {"tool": 0.5, "generation": 0.4}
DEFAULT_SIGMA = 0.3
# A cache hit's retrieval: one lookup instead of the shards' vector search.
CACHE_HIT_MEDIAN_MS = 15.0
ERROR_MESSAGES = {
    "auth": "session store unavailable",
    "history": "conversation store timed out",
    "rewrite": "model provider returned 503",
    "embedding": "embedding request timed out",
    "retrieval": "vector index shard unavailable",
    "rerank": "reranker returned 500",
    "chat": "stream interrupted by model provider",
}


@dataclass(frozen=True)
class Profile:
    """How often things vary or go wrong, per trace."""

    error_rate: float = 0.01
    outlier_rate: float = 0.02
    tool_rate: float = 0.2


@dataclass(frozen=True)
class Switches:
    """Changes to the pipeline itself, as a team would ship them: the traffic they make
    is what a what-if predicts (``docs/whatif.md``). The default is the pipeline as is."""

    concurrent_history_rewrite: bool = False  # load history while rewriting the query
    skip_rerank: bool = False
    retrieval_cache_hit_ratio: float = 0.0  # a hit answers in ~CACHE_HIT_MEDIAN_MS
    generation_speedup: float = 0.0  # 0.2: generation takes 20 % less time

    def __post_init__(self) -> None:
        if not 0 <= self.retrieval_cache_hit_ratio <= 1:
            raise ValueError("The retrieval cache's hit ratio is between 0 and 1.")
        if not 0 <= self.generation_speedup < 1:
            raise ValueError("The generation speed-up is at least 0 and under 1.")


@dataclass(frozen=True)
class Drift:
    """One step slowed down now and then, as a provider or a shard has bad minutes: ``factor``
    times its usual duration for ``length_s`` seconds every ``every_s``, the first time
    ``first_s`` into the run. Its stage goes over budget and comes back, so violations open
    and close while the rest of the pipeline stays within budget."""

    step: str
    factor: float = 2.5
    every_s: float = 900.0
    length_s: float = 180.0
    first_s: float = 300.0

    def __post_init__(self) -> None:
        if self.step not in MEDIAN_MS:
            raise ValueError(f"The drifting step is one of {', '.join(MEDIAN_MS)}.")
        if not 1 <= self.factor <= 100:
            raise ValueError("The drift factor is between 1 and 100.")
        if not 0 < self.length_s < self.every_s:
            raise ValueError("A drift lasts more than 0 s and less than its period.")
        if self.first_s < 0:
            raise ValueError("The first drift starts at 0 s or later.")

    def active(self, elapsed_s: float) -> bool:
        """Whether the step drifts ``elapsed_s`` seconds into the run."""
        if elapsed_s < self.first_s:
            return False
        return (elapsed_s - self.first_s) % self.every_s < self.length_s


@dataclass(frozen=True)
class TraceShape:
    """What the pipeline recognises: the service and the root span's name and attributes."""

    service: str = DEFAULT_SERVICE
    root_span: str = DEFAULT_ROOT_SPAN
    root_attributes: Mapping[str, AttributeValue] = field(default_factory=dict)


def shape_for_pipeline(*, pipeline: Pipeline) -> TraceShape:
    root = pipeline.match_root_span.strip()
    # A glob names many spans, not one: fall back to a plausible name.
    if not root or any(char in root for char in "*?["):
        root = DEFAULT_ROOT_SPAN
    attributes = {
        key: value
        for key, value in (pipeline.match_attributes or {}).items()
        if isinstance(value, str | bool | int | float)
    }
    return TraceShape(
        service=pipeline.match_service.strip() or DEFAULT_SERVICE,
        root_span=root,
        root_attributes=attributes,
    )


@dataclass
class PlannedSpan:
    index: int
    parent: int | None
    name: str
    kind: SpanKind
    start_ms: float
    end_ms: float
    attributes: dict[str, AttributeValue]
    events: list[tuple[str, float, dict[str, AttributeValue]]] = field(default_factory=list)
    error: str | None = None
    # The step of the request a child of the root carries out (a key of MEDIAN_MS, or
    # "chat" for the LLM call), so that an application can run the plan step by step.
    step: str | None = None
    # The LLM call's: the serving engine's draw (a span for it only where the engine
    # answered), and when each chunk after the first arrives, in ms after the first token.
    engine: EngineDraw | None = None
    chunks_ms: tuple[float, ...] = ()


@dataclass
class TracePlan:
    """One request's spans, parents before children; offsets in ms from the request start."""

    spans: list[PlannedSpan]

    @property
    def root(self) -> PlannedSpan:
        return self.spans[0]

    @property
    def error(self) -> bool:
        return self.root.error is not None


class TracePlanner:
    """Draws the schedule of one RAG chat request at a time."""

    def __init__(
        self,
        *,
        rng: random.Random,
        shape: TraceShape,
        profile: Profile | None = None,
        switches: Switches | None = None,
        drift: Drift | None = None,
    ) -> None:
        self.rng = rng
        self.shape = shape
        self.profile = profile or Profile()
        self.switches = switches or Switches()
        self.drift = drift
        self._spans: list[PlannedSpan] = []
        self._slow: str | None = None  # the step whose next span is an outlier
        self._drifting: str | None = None  # the step slowed by the drift in this trace

    def plan(self, *, elapsed_s: float = 0.0) -> TracePlan:
        """One request's schedule, ``elapsed_s`` seconds into the run (for the drift)."""
        # Each step draws from a stream of its own, seeded once per trace: the same seed
        # gives the same durations to every step that runs, whatever the switches add or
        # leave out, so traffic with and without a change can be compared trace by trace.
        self._seed = self.rng.getrandbits(64)
        self._streams: dict[str, random.Random] = {}
        drift = self.drift
        self._drifting = drift.step if drift is not None and drift.active(elapsed_s) else None
        decide, profile, switches = self._stream("trace"), self.profile, self.switches
        with_tools = decide.random() < profile.tool_rate
        outlier, slow = decide.random(), decide.choice(list(MEDIAN_MS))
        # The slow step of an outlier trace; a step that does not run is not slow.
        self._slow = slow if outlier < profile.outlier_rate else None
        errs, chosen = decide.random(), decide.choice(list(ERROR_MESSAGES))
        failing: str | None = chosen
        if errs >= profile.error_rate or (chosen == "rerank" and switches.skip_rerank):
            failing = None  # a step left out cannot fail
        self._failing = failing
        self._spans = []
        root = self._add(None, self.shape.root_span, SpanKind.SERVER, 0.0, 0.0, {})
        steps: list[tuple[str, Callable[[float, str | None], float]]] = [("auth", self._auth)]
        if switches.concurrent_history_rewrite:
            steps.append(("history", self._history_with_rewrite))
        else:
            steps += [("history", self._history), ("rewrite", self._rewrite)]
        steps += [("embedding", self._embedding), ("retrieval", self._retrieval)]
        if not switches.skip_rerank:
            steps.append(("rerank", self._rerank))
        if with_tools:
            steps.append(("tool", self._tools))
        steps.append(("chat", self._chat))
        cursor = self._gap("start")
        for name, step in steps:
            error = ERROR_MESSAGES[name] if name == failing else None
            cursor = step(cursor, error) + self._gap(name)
            if self._failed:
                break  # the request fails here: nothing after the failing step runs
        root.end_ms = cursor + self._gap("end")
        root.attributes = self._root_attributes(failed=failing is not None)
        if failing is not None:
            root.error = ERROR_MESSAGES[failing]
        return TracePlan(self._spans)

    def _stream(self, name: str) -> random.Random:
        stream = self._streams.get(name)
        if stream is None:
            key = _STREAM_KEYS.get(name)
            if key is None:
                key = _STREAM_KEYS[name] = zlib.crc32(name.encode()) * 0x9E3779B97F4A7C15
            stream = self._streams[name] = _Stream((self._seed ^ key) & _MASK)
        return stream

    @property
    def _failed(self) -> bool:
        return any(span.error is not None for span in self._spans[1:])

    def _add(
        self,
        parent: int | None,
        name: str,
        kind: SpanKind,
        start: float,
        end: float,
        attributes: dict[str, AttributeValue],
        error: str | None = None,
        step: str | None = None,
    ) -> PlannedSpan:
        span = PlannedSpan(
            len(self._spans), parent, name, kind, start, end, attributes, error=error, step=step
        )
        self._spans.append(span)
        return span

    def _draw(self, step: str) -> float:
        stream = self._stream(step)
        duration = stream.lognormvariate(math.log(MEDIAN_MS[step]), SIGMA.get(step, DEFAULT_SIGMA))
        slow_by = stream.uniform(3.0, 8.0)
        if step == self._slow:
            duration *= slow_by
            self._slow = None  # one slow span per outlier trace
        if step == self._drifting and self.drift is not None:
            duration *= self.drift.factor
        return duration

    def _gap(self, after: str) -> float:
        # Orchestration between steps: small, and on nobody's stage.
        return self._stream(f"gap-{after}").uniform(0.2, 2.5)

    def _root_attributes(self, *, failed: bool) -> dict[str, AttributeValue]:
        attributes: dict[str, AttributeValue] = {}
        method, _, route = self.shape.root_span.partition(" ")
        if route.startswith("/"):
            attributes.update({"http.request.method": method, "http.route": route})
        attributes["http.response.status_code"] = 500 if failed else 200
        attributes.update(self.shape.root_attributes)
        return attributes

    def _auth(self, start: float, error: str | None) -> float:
        end = start + self._draw("auth")
        self._add(0, "auth.verify_session", SpanKind.INTERNAL, start, end, {}, error, "auth")
        return end

    def _history(self, start: float, error: str | None) -> float:
        end = start + self._draw("history")
        attributes: dict[str, AttributeValue] = {
            "db.system.name": "redis",
            "db.operation.name": "GET",
            "db.namespace": "conversations",
        }
        self._add(0, "history.load", SpanKind.CLIENT, start, end, attributes, error, "history")
        return end

    def _history_with_rewrite(self, start: float, error: str | None) -> float:
        """Both at once: the rewrite no longer waits for the history to load."""
        history_end = self._history(start, error)
        rewrite_error = ERROR_MESSAGES["rewrite"] if self._failing == "rewrite" else None
        return max(history_end, self._rewrite(start, rewrite_error))

    def _rewrite(self, start: float, error: str | None) -> float:
        end = start + self._draw("rewrite")
        stream = self._stream("rewrite")
        attributes = _llm_attributes("gpt-4o-mini", stream.randint(200, 600))
        attributes["gen_ai.usage.output_tokens"] = stream.randint(12, 40)
        name = "rewrite_query gpt-4o-mini"
        self._add(0, name, SpanKind.CLIENT, start, end, attributes, error, "rewrite")
        return end

    def _embedding(self, start: float, error: str | None) -> float:
        end = start + self._draw("embedding")
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "embeddings",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "text-embedding-3-small",
            "gen_ai.usage.input_tokens": self._stream("embedding").randint(8, 60),
            "openinference.span.kind": "EMBEDDING",
        }
        name = "embeddings text-embedding-3-small"
        self._add(0, name, SpanKind.CLIENT, start, end, attributes, error, "embedding")
        return end

    def _retrieval(self, start: float, error: str | None) -> float:
        if self._stream("cache").random() < self.switches.retrieval_cache_hit_ratio and not error:
            return self._retrieval_cached(start)
        stream = self._stream("retrieval")
        fan_out = self._add(
            0,
            "retrieve_documents",
            SpanKind.INTERNAL,
            start,
            start,
            {"openinference.span.kind": "CHAIN"},
            step="retrieval",
        )
        shards = stream.randint(2, 4)
        failing_shard = stream.randrange(shards) if error else -1
        ends = []
        for shard in range(shards):
            # Queries go out together; the slowest shard holds up everything after it.
            shard_start = start + stream.uniform(0.05, 1.5)
            shard_end = shard_start + self._draw("retrieval")
            attributes: dict[str, AttributeValue] = {
                "openinference.span.kind": "RETRIEVER",
                "db.system.name": "qdrant",
                "db.collection.name": f"docs-{shard}",
                "retrieval.top_k": 20,
            }
            shard_error = error if shard == failing_shard else None
            name = f"vector.search shard-{shard}"
            self._add(
                fan_out.index,
                name,
                SpanKind.CLIENT,
                shard_start,
                shard_end,
                attributes,
                shard_error,
            )
            ends.append(shard_end)
        fan_out.end_ms = max(ends) + stream.uniform(0.1, 1.0)
        fan_out.error = error
        return fan_out.end_ms

    def _retrieval_cached(self, start: float) -> float:
        hit_ms = self._stream("cache").lognormvariate(math.log(CACHE_HIT_MEDIAN_MS), DEFAULT_SIGMA)
        end = start + hit_ms
        attributes: dict[str, AttributeValue] = {
            "openinference.span.kind": "RETRIEVER",
            "db.system.name": "redis",
            "retrieval.cache": "hit",
        }
        name = "vector.search cache"
        self._add(0, name, SpanKind.CLIENT, start, end, attributes, step="retrieval")
        return end

    def _rerank(self, start: float, error: str | None) -> float:
        end = start + self._draw("rerank")
        attributes: dict[str, AttributeValue] = {
            "openinference.span.kind": "RERANKER",
            "reranker.model_name": "bge-reranker-v2-m3",
            "reranker.top_k": 5,
        }
        name = "rerank bge-reranker-v2-m3"
        self._add(0, name, SpanKind.CLIENT, start, end, attributes, error, "rerank")
        return end

    def _tools(self, start: float, error: str | None) -> float:
        cursor = start
        stream = self._stream("tools")
        for tool in stream.sample(
            ["web_search", "get_order_status", "calculator"], k=stream.randint(1, 2)
        ):
            end = cursor + self._draw("tool")
            attributes: dict[str, AttributeValue] = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": tool,
                "openinference.span.kind": "TOOL",
            }
            name = f"execute_tool {tool}"
            self._add(0, name, SpanKind.INTERNAL, cursor, end, attributes, error, "tool")
            cursor = end + self._gap(f"tool-{tool}")
        return cursor

    def _chat(self, start: float, error: str | None) -> float:
        ttft = self._draw("ttft")
        generation = self._draw("generation") * (1 - self.switches.generation_speedup)
        stream = self._stream("chat")
        tokens_per_second = stream.uniform(60.0, 110.0)
        input_tokens = stream.randint(1500, 4000)
        hosted = self._stream("model").random() < FALLBACK_SHARE
        model = FALLBACK_MODEL if hosted else PRIMARY_MODEL
        attributes = _llm_attributes(
            model, input_tokens, provider=FALLBACK_PROVIDER if hosted else PRIMARY_PROVIDER
        )
        output_tokens = max(1, round(generation / 1000 * tokens_per_second))
        attributes["gen_ai.usage.output_tokens"] = output_tokens
        end = start + ttft + generation
        span = self._add(0, f"chat {model}", SpanKind.CLIENT, start, end, attributes, error, "chat")
        # Instrumentations report the first token either way; both must be understood.
        if stream.random() < 0.5:
            attributes["gen_ai.response.time_to_first_chunk"] = ttft / 1000
        else:
            span.events.append(("first_token", start + ttft, {}))
        span.chunks_ms = tuple(chunk_offsets(self._stream("chunks"), generation_ms=generation))
        span.events += [
            (CHUNK_EVENT, start + ttft + offset, {}) for offset in (0.0, *span.chunks_ms)
        ]
        # Drawn whether or not this answer came from the engine: a client that runs the plan
        # calls the engine first and lets its levers decide when to fall back.
        span.engine = engine_draw(self._stream("engine"))
        if not hosted:
            times = span.engine.times(first_token_ms=ttft, duration_ms=ttft + generation)
            engine_attributes = times.attributes(
                model=model, input_tokens=input_tokens, output_tokens=output_tokens
            )
            self._add(
                span.index,
                ENGINE_SPAN,
                SpanKind.SERVER,
                start + times.start_ms,
                start + times.end_ms,
                engine_attributes,
            )
        return end


_MASK = (1 << 64) - 1
_STREAM_KEYS: dict[str, int] = {}


class _Stream(random.Random):
    """One step's numbers for one trace (splitmix64 from a seed): random.Random's methods
    on top, started in a fraction of a microsecond where random.Random fills 2.5 KB of
    state for every seed, which would cost more than the rest of a trace's plan."""

    def __init__(self, seed: int) -> None:  # no random.Random state to seed: random() is ours
        self._state = seed

    def random(self) -> float:
        self._state = state = (self._state + 0x9E3779B97F4A7C15) & _MASK
        z = ((state ^ (state >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        return ((z ^ (z >> 31)) >> 11) * (1.0 / (1 << 53))


def _llm_attributes(
    model: str, input_tokens: int, *, provider: str = "openai"
) -> dict[str, AttributeValue]:
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider,
        "gen_ai.request.model": model,
        "gen_ai.response.model": model,
        "gen_ai.usage.input_tokens": input_tokens,
        "openinference.span.kind": "LLM",
    }
