"""Trace shapes and plans: spans with offsets from the request start."""

import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from opentelemetry.trace import SpanKind
from opentelemetry.util.types import AttributeValue

from apps.pipelines.models import Pipeline

DEFAULT_SERVICE = "chat-api"
DEFAULT_ROOT_SPAN = "POST /chat"

# Median milliseconds and lognormal spread per step; the spread sets how long the tail is.
MEDIAN_MS = {
    "auth": 10.0,
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
ERROR_MESSAGES = {
    "auth": "session store unavailable",
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
        self, *, rng: random.Random, shape: TraceShape, profile: Profile | None = None
    ) -> None:
        self.rng = rng
        self.shape = shape
        self.profile = profile or Profile()
        self._spans: list[PlannedSpan] = []
        self._slow: str | None = None  # the step whose next span is an outlier

    def plan(self) -> TracePlan:
        rng, profile = self.rng, self.profile
        with_tools = rng.random() < profile.tool_rate
        slow_candidates = [step for step in MEDIAN_MS if with_tools or step != "tool"]
        self._slow = rng.choice(slow_candidates) if rng.random() < profile.outlier_rate else None
        failing = rng.choice(list(ERROR_MESSAGES)) if rng.random() < profile.error_rate else None
        self._spans = []
        root = self._add(None, self.shape.root_span, SpanKind.SERVER, 0.0, 0.0, {})
        steps: list[tuple[str, Callable[[float, str | None], float]]] = [
            ("auth", self._auth),
            ("rewrite", self._rewrite),
            ("embedding", self._embedding),
            ("retrieval", self._retrieval),
            ("rerank", self._rerank),
        ]
        if with_tools:
            steps.append(("tool", self._tools))
        steps.append(("chat", self._chat))
        cursor = self._gap()
        for name, step in steps:
            error = ERROR_MESSAGES[name] if name == failing else None
            cursor = step(cursor, error) + self._gap()
            if error:
                break  # the request fails here: nothing after the failing step runs
        root.end_ms = cursor + self._gap()
        root.attributes = self._root_attributes(failed=failing is not None)
        if failing is not None:
            root.error = ERROR_MESSAGES[failing]
        return TracePlan(self._spans)

    def _add(
        self,
        parent: int | None,
        name: str,
        kind: SpanKind,
        start: float,
        end: float,
        attributes: dict[str, AttributeValue],
        error: str | None = None,
    ) -> PlannedSpan:
        span = PlannedSpan(
            len(self._spans), parent, name, kind, start, end, attributes, error=error
        )
        self._spans.append(span)
        return span

    def _draw(self, step: str) -> float:
        duration = self.rng.lognormvariate(
            math.log(MEDIAN_MS[step]), SIGMA.get(step, DEFAULT_SIGMA)
        )
        if step == self._slow:
            duration *= self.rng.uniform(3.0, 8.0)
            self._slow = None  # one slow span per outlier trace
        return duration

    def _gap(self) -> float:
        # Orchestration between steps: small, and on nobody's stage.
        return self.rng.uniform(0.2, 2.5)

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
        self._add(0, "auth.verify_session", SpanKind.INTERNAL, start, end, {}, error)
        return end

    def _rewrite(self, start: float, error: str | None) -> float:
        end = start + self._draw("rewrite")
        attributes = _llm_attributes("gpt-4o-mini", self.rng.randint(200, 600))
        attributes["gen_ai.usage.output_tokens"] = self.rng.randint(12, 40)
        self._add(0, "rewrite_query gpt-4o-mini", SpanKind.CLIENT, start, end, attributes, error)
        return end

    def _embedding(self, start: float, error: str | None) -> float:
        end = start + self._draw("embedding")
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "embeddings",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "text-embedding-3-small",
            "gen_ai.usage.input_tokens": self.rng.randint(8, 60),
            "openinference.span.kind": "EMBEDDING",
        }
        name = "embeddings text-embedding-3-small"
        self._add(0, name, SpanKind.CLIENT, start, end, attributes, error)
        return end

    def _retrieval(self, start: float, error: str | None) -> float:
        fan_out = self._add(
            0,
            "retrieve_documents",
            SpanKind.INTERNAL,
            start,
            start,
            {"openinference.span.kind": "CHAIN"},
        )
        shards = self.rng.randint(2, 4)
        failing_shard = self.rng.randrange(shards) if error else -1
        ends = []
        for shard in range(shards):
            # Queries go out together; the slowest shard holds up everything after it.
            shard_start = start + self.rng.uniform(0.05, 1.5)
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
        fan_out.end_ms = max(ends) + self.rng.uniform(0.1, 1.0)
        fan_out.error = error
        return fan_out.end_ms

    def _rerank(self, start: float, error: str | None) -> float:
        end = start + self._draw("rerank")
        attributes: dict[str, AttributeValue] = {
            "openinference.span.kind": "RERANKER",
            "reranker.model_name": "bge-reranker-v2-m3",
            "reranker.top_k": 5,
        }
        self._add(0, "rerank bge-reranker-v2-m3", SpanKind.CLIENT, start, end, attributes, error)
        return end

    def _tools(self, start: float, error: str | None) -> float:
        cursor = start
        for tool in self.rng.sample(
            ["web_search", "get_order_status", "calculator"], k=self.rng.randint(1, 2)
        ):
            end = cursor + self._draw("tool")
            attributes: dict[str, AttributeValue] = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": tool,
                "openinference.span.kind": "TOOL",
            }
            self._add(0, f"execute_tool {tool}", SpanKind.INTERNAL, cursor, end, attributes, error)
            cursor = end + self._gap()
        return cursor

    def _chat(self, start: float, error: str | None) -> float:
        ttft = self._draw("ttft")
        generation = self._draw("generation")
        tokens_per_second = self.rng.uniform(60.0, 110.0)
        attributes = _llm_attributes("gpt-4o", self.rng.randint(1500, 4000))
        attributes["gen_ai.usage.output_tokens"] = max(
            1, round(generation / 1000 * tokens_per_second)
        )
        end = start + ttft + generation
        span = self._add(0, "chat gpt-4o", SpanKind.CLIENT, start, end, attributes, error)
        # Instrumentations report the first token either way; both must be understood.
        if self.rng.random() < 0.5:
            attributes["gen_ai.response.time_to_first_chunk"] = ttft / 1000
        else:
            span.events.append(("first_token", start + ttft, {}))
        return end


def _llm_attributes(model: str, input_tokens: int) -> dict[str, AttributeValue]:
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": model,
        "gen_ai.response.model": model,
        "gen_ai.usage.input_tokens": input_tokens,
        "openinference.span.kind": "LLM",
    }
