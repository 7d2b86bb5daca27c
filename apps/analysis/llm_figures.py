"""What a trace's LLM calls say about each stage they count in: which model served it, and
how the answer streamed (``docs/ingestion.md``, "Models and streaming").

- **Model**: ``gen_ai.response.model`` (else ``gen_ai.request.model``) and
  ``gen_ai.provider.name`` (else ``gen_ai.system``) of a span with a part in the stage,
  its own or inherited. Where several have one, the span that ended last answered (a
  fallback ends after the primary it replaced, a hedge's winner after the loser was
  cancelled), ties to the later start.
- **Streaming**: a span with a first token and an output token count
  (``gen_ai.usage.output_tokens``, else ``gen_ai.usage.completion_tokens``) or chunk
  events (``llm.content.completion.chunk``, as OpenLLMetry writes them, or
  ``gen_ai.content.chunk``) gives the time after its first token, its output tokens and
  the longest gap between two chunks, the first token counting as the first chunk. The
  stage takes them from the last-ending such span with a part in it.

Values are read as ingestion checked them; anything else (spans stored before, another
type) counts as absent, so one odd span cannot stop a trace's analysis.
"""

import itertools
from dataclasses import dataclass, field

from apps.analysis.spans import Span
from apps.analysis.stage_matching import SpanMatch, first_token_ns

RESPONSE_MODEL = "gen_ai.response.model"
REQUEST_MODEL = "gen_ai.request.model"
PROVIDER = "gen_ai.provider.name"
SYSTEM = "gen_ai.system"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
COMPLETION_TOKENS = "gen_ai.usage.completion_tokens"
CHUNK_EVENTS = frozenset(("llm.content.completion.chunk", "gen_ai.content.chunk"))
# Stored names are cut to these lengths (ServedModel's columns).
MAX_PROVIDER_CHARS = 100
MAX_MODEL_CHARS = 200


@dataclass(slots=True)
class StreamFigures:
    """One streamed answer: output tokens (None: not reported), its time after the first
    token, and the longest gap between chunks (None: no chunk events)."""

    output_tokens: int | None
    generation_ns: int
    max_gap_ns: int | None
    first_token_ns: int = field(default=0, compare=False)


@dataclass(slots=True)
class StageLlm:
    """The model and the streamed answer a stage's sample is marked with; either may be
    missing."""

    model: tuple[str, str] | None = None  # (provider, model)
    stream: StreamFigures | None = None
    _model_at: tuple[int, int] = (-1, -1)
    _stream_at: tuple[int, int] = (-1, -1)


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def span_model(span: Span) -> tuple[str, str] | None:
    attributes = span.attributes
    model = _text(attributes.get(RESPONSE_MODEL)) or _text(attributes.get(REQUEST_MODEL))
    if not model:
        return None
    provider = _text(attributes.get(PROVIDER)) or _text(attributes.get(SYSTEM))
    return provider[:MAX_PROVIDER_CHARS], model[:MAX_MODEL_CHARS]


def _tokens(span: Span) -> int | None:
    for key in (OUTPUT_TOKENS, COMPLETION_TOKENS):
        value = span.attributes.get(key)
        if type(value) is int and value >= 0:
            return value
    return None


def span_stream(span: Span, match: SpanMatch) -> StreamFigures | None:
    """The span's streamed answer, or None when it reports none."""
    tokens = _tokens(span)
    chunks = [time for name, time in span.events if name in CHUNK_EVENTS] if span.events else []
    if tokens is None and not chunks:
        return None
    token = match.first_token_ns if match.inherited_from is None else None
    if token is None:
        token = first_token_ns(span)
    if token is None:
        return None
    stop = span.stop_ns
    max_gap = None
    if chunks:
        times = sorted({token, *(min(max(time, token), stop) for time in chunks)})
        max_gap = max((b - a for a, b in itertools.pairwise(times)), default=0)
    return StreamFigures(tokens, stop - token, max_gap, token)


def stage_llm(by_id: dict[str, Span], matches: dict[str, SpanMatch]) -> dict[str, StageLlm]:
    """Per stage slug, the model and streamed answer of the trace's LLM calls in it."""
    found: dict[str, StageLlm] = {}
    for span_id, span in by_id.items():
        attributes = span.attributes
        if not (
            RESPONSE_MODEL in attributes
            or REQUEST_MODEL in attributes
            or OUTPUT_TOKENS in attributes
            or COMPLETION_TOKENS in attributes
            or span.events
        ):
            continue
        match = matches[span_id]
        stages = [stage for stage in match.stages() if stage is not None]
        if not stages:
            continue
        at = (span.stop_ns, span.start_ns)
        model = span_model(span)
        stream = span_stream(span, match)
        if model is None and stream is None:
            continue
        streamed_in = None if stream is None else match.stage_at(stream.first_token_ns)
        for stage in stages:
            figures = found.get(stage)
            if figures is None:
                figures = found[stage] = StageLlm()
            if model is not None and at > figures._model_at:
                figures.model, figures._model_at = model, at
            if stage == streamed_in and at > figures._stream_at:
                figures.stream, figures._stream_at = stream, at
    return found
