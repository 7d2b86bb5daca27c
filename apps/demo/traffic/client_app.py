"""The demo's application: one RAG chat request served through the latency-budgets client.

Each call sleeps what the planner drew for it, as the real call would take, and the
levers decide around those calls as they would around real ones: retrieval is hedged
after its p95, rerank skipped or capped, the answer streamed from the primary model with
a faster one to fall back on. Without levers the same calls run as plain stages.
"""

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from latency_budgets import Attempt, Budgets, Request
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer
from opentelemetry.util.types import AttributeValue

from apps.demo.traffic.llm_call import (
    CHUNK_EVENT,
    ENGINE_SPAN,
    FALLBACK_MODEL,
    FALLBACK_PROVIDER,
    PRIMARY_MODEL,
    PRIMARY_PROVIDER,
    EngineDraw,
)
from apps.demo.traffic.planned_steps import PlannedRequest, PlannedStep
from apps.demo.traffic.slow_phases import FIRST_TOKEN, RETRIEVAL

CHAT = "chat"  # the planner's LLM call, two stages here: until and after the first token
GENERATION = "generation"
RERANK = "rerank"
# A smaller model answers sooner and faster, from the same planned draws.
FAST_MODEL_FIRST_TOKEN_SHARE = 0.4
FAST_MODEL_GENERATION_SHARE = 0.6
# A cancelled attempt stops at once; a stop of the whole run is noticed within this.
ABORT_CHECK_S = 0.05


class UpstreamError(Exception):
    """A step failing as the planner planned it (a provider's 503, a shard down)."""


@dataclass(frozen=True)
class RequestJob:
    """One request to serve: what the usual dependencies take, and what a second replica
    or the faster model would take (``spare``, another draw from the planner)."""

    planned: PlannedRequest
    spare: PlannedRequest
    slow_step: str | None = None
    slow_factor: float = 1.0

    def slowed(self, step: str, ms: float) -> float:
        return ms * self.slow_factor if step == self.slow_step else ms


@dataclass(frozen=True)
class ModelCall:
    """One streamed call to a model, as the plan drew it: ``chunks_ms`` are the chunks
    after the first, in ms after the first token; ``slowed_ms`` of the first token's wait
    is a slow phase's (an overloaded engine queues)."""

    model: str
    provider: str
    first_token_ms: float
    generation_ms: float
    chunks_ms: tuple[float, ...]
    input_tokens: int
    output_tokens: int
    engine: EngineDraw | None = None
    slowed_ms: float = 0.0

    def attributes(self) -> dict[str, AttributeValue]:
        return {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": self.provider,
            "gen_ai.request.model": self.model,
            "gen_ai.usage.input_tokens": self.input_tokens,
            "gen_ai.request.stream": True,
        }


@dataclass(frozen=True)
class RequestOutcome:
    had_deadline: bool
    within_deadline: bool
    failed: bool
    cut_short: bool  # the run stopped while it was under way
    holdout: bool = False  # the client ran it with every lever off


class DemoApplication:
    """Serves requests of ``pipeline`` through ``budgets``; thread-safe, one call a request."""

    def __init__(
        self,
        *,
        budgets: Budgets,
        tracer: Tracer,
        pipeline: str,
        levers: bool,
        speed: float,
        abort: threading.Event,
    ) -> None:
        self.budgets = budgets
        self.tracer = tracer
        self.pipeline = pipeline
        self.levers = levers
        self.speed = speed
        self.abort = abort

    def serve(self, job: RequestJob) -> RequestOutcome:
        planned = job.planned
        failed = False
        # The web framework's server span, as its instrumentation opens it: the pipeline
        # matches the trace on this root, the client's request span is its child.
        with self.tracer.start_as_current_span(
            planned.root_name, kind=SpanKind.SERVER, attributes=planned.root_attributes
        ) as root:
            request = self.budgets.request(self.pipeline)
            try:
                with request as req:
                    for step in planned.steps:
                        self._wait(step.gap_before_ms)
                        self._run(req, step, job)
            except UpstreamError as error:
                failed = True
                root.record_exception(error)
                root.set_status(Status(StatusCode.ERROR, str(error)))
            had_deadline = request.deadline_unix_ms is not None
            within = had_deadline and not request.expired
            self._wait(planned.gap_after_ms)
        return RequestOutcome(
            had_deadline=had_deadline,
            within_deadline=within,
            failed=failed,
            cut_short=self.abort.is_set(),
            holdout=request.holdout,
        )

    def _run(self, req: Request, step: PlannedStep, job: RequestJob) -> None:
        if step.step == CHAT:
            self._answer(req, step, job)
            return
        duration = job.slowed(step.step, step.duration_ms)
        if self.levers and step.step == RERANK and req.should_skip(RERANK):
            return
        with req.stage(step.step):
            if not self.levers:
                self._wait(duration)
            elif step.step == RETRIEVAL:
                spare = job.spare.step(RETRIEVAL)
                second = step.duration_ms if spare is None else spare.duration_ms

                def search(attempt: Attempt) -> bool:
                    return self._call(attempt, duration if attempt.number == 1 else second)

                req.hedge(search, after="p95")
            elif step.step == RERANK:
                req.cap(RERANK, lambda attempt: self._call(attempt, duration), False)
            else:
                self._wait(duration)
            _fail_as_planned(step)

    def _answer(self, req: Request, step: PlannedStep, job: RequestJob) -> None:
        """The LLM call, streamed: waiting for its first chunk is the first-token stage,
        the rest of the stream the generation stage."""
        first_token = step.first_token_ms or 0.0
        slowed = job.slowed(FIRST_TOKEN, first_token)
        # The team's own engine answers first; the levers fall back to the hosted model.
        call = ModelCall(
            model=PRIMARY_MODEL,
            provider=PRIMARY_PROVIDER,
            first_token_ms=slowed,
            generation_ms=step.duration_ms - first_token,
            chunks_ms=step.chunks_ms,
            input_tokens=step.input_tokens,
            output_tokens=step.output_tokens,
            engine=step.engine,
            slowed_ms=slowed - first_token,
        )

        def primary(attempt: Attempt) -> Iterator[str]:
            return self._stream(attempt, call)

        chunks: Iterator[str] | None = None
        try:
            with req.stage(FIRST_TOKEN):
                if self.levers:
                    chunks = req.fallback(primary, self._fast_model(step, job))
                else:
                    chunks = primary(Attempt(1, "primary"))
                next(chunks, None)
            with req.stage(GENERATION):
                for _chunk in chunks:
                    pass
                _fail_as_planned(step)
        finally:
            # A stream left part-way (a failure, the run stopping) cancels its attempts.
            if chunks is not None:
                _close(chunks)

    def _fast_model(self, step: PlannedStep, job: RequestJob) -> Callable[[Attempt], Iterator[str]]:
        drawn = job.spare.step(CHAT) or step
        first_token = (drawn.first_token_ms or 0.0) * FAST_MODEL_FIRST_TOKEN_SHARE
        call = ModelCall(
            model=FALLBACK_MODEL,
            provider=FALLBACK_PROVIDER,
            first_token_ms=first_token,
            generation_ms=(drawn.duration_ms - (drawn.first_token_ms or 0.0))
            * FAST_MODEL_GENERATION_SHARE,
            chunks_ms=tuple(ms * FAST_MODEL_GENERATION_SHARE for ms in drawn.chunks_ms),
            input_tokens=drawn.input_tokens,
            output_tokens=drawn.output_tokens,
        )
        return lambda attempt: self._stream(attempt, call)

    def _stream(self, attempt: Attempt, call: ModelCall) -> Iterator[str]:
        """The call's chunks, under a span as the model's client instrumentation writes it
        (OpenLLMetry's chunk events); a model on the team's own engine adds the engine's
        request span under it, as vLLM's tracing does once the trace context reaches it."""
        span = self.tracer.start_span(
            f"chat {call.model}", kind=SpanKind.CLIENT, attributes=call.attributes()
        )
        started_ns = time.time_ns()
        first_ns: int | None = None
        finished = False
        try:
            if not self._call(attempt, call.first_token_ms):
                return
            first_ns = time.time_ns()
            span.add_event("first_token", timestamp=first_ns)
            span.add_event(CHUNK_EVENT, timestamp=first_ns)
            yield "The"
            previous = 0.0
            for offset in call.chunks_ms:
                if not self._call(attempt, offset - previous):
                    return
                previous = offset
                span.add_event(CHUNK_EVENT)
                yield " answer"
            finished = True
        finally:
            end_ns = time.time_ns()
            if finished:
                span.set_attribute("gen_ai.response.model", call.model)
                span.set_attribute("gen_ai.usage.output_tokens", call.output_tokens)
            if call.engine is not None and first_ns is not None:
                self._engine_span(span, call, started_ns, first_ns, end_ns)
            span.end(end_time=end_ns)

    def _engine_span(
        self, parent: trace.Span, call: ModelCall, started_ns: int, first_ns: int, end_ns: int
    ) -> None:
        assert call.engine is not None
        times = call.engine.times(
            first_token_ms=(first_ns - started_ns) / 1e6,
            duration_ms=(end_ns - started_ns) / 1e6,
            slowed_ms=call.slowed_ms * self.speed,
        )
        engine = self.tracer.start_span(
            ENGINE_SPAN,
            context=trace.set_span_in_context(parent),
            kind=SpanKind.SERVER,
            start_time=started_ns + round(times.start_ms * 1e6),
            attributes=times.attributes(
                model=call.model,
                input_tokens=call.input_tokens,
                output_tokens=call.output_tokens,
            ),
        )
        engine.end(end_time=started_ns + round(times.end_ms * 1e6))

    def _call(self, attempt: Attempt, ms: float) -> bool:
        return dependency_call(ms, attempt=attempt, speed=self.speed, abort=self.abort)

    def _wait(self, ms: float) -> None:
        self.abort.wait(ms * self.speed / 1000)


def dependency_call(ms: float, *, attempt: Attempt, speed: float, abort: threading.Event) -> bool:
    """A dependency's call taking ``ms`` (times ``speed``), slept in small steps; False as
    soon as the lever cancels the attempt (or the run stops), so that a losing attempt
    stops working as a real call's closed connection would."""
    end = time.monotonic() + ms * speed / 1000
    while not abort.is_set():
        left = end - time.monotonic()
        if left <= 0:
            return True
        if attempt.cancelled.wait(min(left, ABORT_CHECK_S)):
            return False
    return False


def _fail_as_planned(step: PlannedStep) -> None:
    if step.error is not None:
        raise UpstreamError(step.error)


def _close(chunks: Iterator[str]) -> None:
    close = getattr(chunks, "close", None)
    if close is not None:
        close()
