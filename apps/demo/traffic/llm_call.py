"""The demo's LLM call as instrumentation and a serving engine report it.

The answer streams from a model on the team's own vLLM (its request span carries the
engine's queue, prefill and decode times, ``docs/ingestion.md``) or, now and then, from a
hosted fallback model that reports nothing of the kind. The client's span carries the
model and provider, its first token and one event per streamed chunk, as OpenLLMetry's
instrumentation writes them; a stream stalls now and then, a long gap between two chunks.
"""

import random
from dataclasses import dataclass

from opentelemetry.util.types import AttributeValue

PRIMARY_MODEL = "llama-3.3-70b-instruct"
PRIMARY_PROVIDER = "vllm"
FALLBACK_MODEL = "gpt-4o-mini"
FALLBACK_PROVIDER = "openai"
ENGINE_SPAN = "llm_request"
CHUNK_EVENT = "llm.content.completion.chunk"
# How often the span mode's answer comes from the fallback (the client mode's levers
# decide that themselves).
FALLBACK_SHARE = 0.06
STALL_SHARE = 0.03  # streams with one long gap between two chunks
CHUNK_MS = 40.0  # a streamed answer arrives a chunk at a time
MAX_CHUNK_EVENTS = 200


@dataclass(frozen=True)
class EngineDraw:
    """What the serving engine adds to the call: the network to and from it, its own
    scheduling, and how the rest of the wait for the first token splits into queue and
    prefill (``queue_share``); busy minutes queue longer."""

    network_out_ms: float
    network_back_ms: float
    scheduling_ms: float
    queue_share: float

    def times(
        self, *, first_token_ms: float, duration_ms: float, slowed_ms: float = 0.0
    ) -> "EngineTimes":
        """The engine's span within a client call whose first token came ``first_token_ms``
        after its start and that lasted ``duration_ms``; ``slowed_ms`` of the wait came from
        an overloaded engine, and queued."""
        out = min(self.network_out_ms, first_token_ms / 4)
        back = min(self.network_back_ms, first_token_ms / 4)
        engine_first = max(first_token_ms - out - back, 0.0)
        waited = max(engine_first - self.scheduling_ms, 0.0)
        slowed = min(max(slowed_ms, 0.0), waited)
        queue = (waited - slowed) * self.queue_share + slowed
        return EngineTimes(
            start_ms=out,
            end_ms=max(duration_ms - back, out + engine_first),
            queue_ms=queue,
            prefill_ms=waited - queue,
            first_token_ms=engine_first,
        )


@dataclass(frozen=True)
class EngineTimes:
    """Offsets from the client call's start, and the engine's own figures."""

    start_ms: float
    end_ms: float
    queue_ms: float
    prefill_ms: float
    first_token_ms: float

    def attributes(
        self, *, model: str, input_tokens: int, output_tokens: int
    ) -> dict[str, AttributeValue]:
        """vLLM's request span attributes (its ``SpanAttributes``), times in seconds."""
        e2e = self.end_ms - self.start_ms
        return {
            "gen_ai.request.model": model,
            "gen_ai.response.model": model,
            "gen_ai.usage.prompt_tokens": input_tokens,
            "gen_ai.usage.completion_tokens": output_tokens,
            "gen_ai.latency.time_in_queue": self.queue_ms / 1000,
            "gen_ai.latency.time_in_model_prefill": self.prefill_ms / 1000,
            "gen_ai.latency.time_in_model_decode": max(e2e - self.first_token_ms, 0.0) / 1000,
            "gen_ai.latency.time_to_first_token": self.first_token_ms / 1000,
            "gen_ai.latency.e2e": e2e / 1000,
        }


def engine_draw(stream: random.Random) -> EngineDraw:
    busy = stream.random() < 0.1
    return EngineDraw(
        network_out_ms=stream.uniform(3.0, 12.0),
        network_back_ms=stream.uniform(2.0, 8.0),
        scheduling_ms=stream.uniform(0.3, 2.0),
        queue_share=stream.uniform(0.5, 0.8) if busy else stream.uniform(0.04, 0.25),
    )


def chunk_offsets(stream: random.Random, *, generation_ms: float) -> list[float]:
    """When each chunk after the first arrives, from the first token: evenly spaced with
    jitter, one long gap in a stalled stream; the last at the end of the generation."""
    count = min(max(1, round(generation_ms / CHUNK_MS)), MAX_CHUNK_EVENTS)
    weights = [stream.uniform(0.6, 1.4) for _ in range(count)]
    if count > 2 and stream.random() < STALL_SHARE:
        weights[stream.randrange(1, count)] += stream.uniform(6.0, 15.0)
    total = sum(weights)
    offsets, at = [], 0.0
    for weight in weights:
        at += generation_ms * weight / total
        offsets.append(at)
    return offsets
