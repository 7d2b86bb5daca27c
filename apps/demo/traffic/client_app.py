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
from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer

from apps.demo.traffic.planned_steps import PlannedRequest, PlannedStep
from apps.demo.traffic.slow_phases import FIRST_TOKEN, RETRIEVAL

CHAT = "chat"  # the planner's LLM call, two stages here: until and after the first token
GENERATION = "generation"
RERANK = "rerank"
# A smaller model answers sooner and faster, from the same planned draws.
FAST_MODEL_FIRST_TOKEN_SHARE = 0.4
FAST_MODEL_GENERATION_SHARE = 0.6
CHUNK_MS = 40.0  # a streamed answer arrives a chunk at a time
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
        generation = step.duration_ms - first_token

        def primary(attempt: Attempt) -> Iterator[str]:
            return self._stream(attempt, job.slowed(FIRST_TOKEN, first_token), generation)

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
        generation = (drawn.duration_ms - (drawn.first_token_ms or 0.0)) * (
            FAST_MODEL_GENERATION_SHARE
        )
        return lambda attempt: self._stream(attempt, first_token, generation)

    def _stream(
        self, attempt: Attempt, first_token_ms: float, generation_ms: float
    ) -> Iterator[str]:
        if not self._call(attempt, first_token_ms):
            return
        yield "The"
        chunks = max(1, round(generation_ms / CHUNK_MS))
        for _ in range(chunks):
            if not self._call(attempt, generation_ms / chunks):
                return
            yield " answer"

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
