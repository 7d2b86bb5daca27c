"""A request's deadline, its stages and the decisions taken on its way.

Times are kept on the monotonic clock: the deadline is turned into a monotonic instant
once, when the request opens, so a wall-clock step during the request changes nothing.
"""

import contextvars
import math
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from opentelemetry import baggage, context, trace

from latency_budgets import protocol
from latency_budgets.attempts import Attempt
from latency_budgets.decisions import Decision
from latency_budgets.figures import PipelineFigures, StageFigures
from latency_budgets.policies import NO_LEVERS, NO_POLICY, StagePolicy
from latency_budgets.residual import expected_rest_ms

if TYPE_CHECKING:
    from latency_budgets.budgets import Budgets

T = TypeVar("T")
INFINITY = math.inf

_current_stage: contextvars.ContextVar["StageScope | None"] = contextvars.ContextVar(
    "latency_budget_stage", default=None
)


def deadline_from_baggage(ctx: context.Context | None = None) -> float | None:
    """The caller's deadline (Unix ms) from baggage; None when absent or not an integer."""
    value = baggage.get_baggage(protocol.BAGGAGE_DEADLINE, ctx)
    if not isinstance(value, str) or not (value.isascii() and value.isdigit()) or len(value) > 16:
        return None
    return float(int(value))


def _ms(value: float) -> str:
    return "∞" if math.isinf(value) else f"{value:.0f} ms"


class Request:
    """One request of a pipeline: open it with ``with budgets.request(...) as req``."""

    def __init__(
        self,
        budgets: "Budgets",
        pipeline: str,
        figures: PipelineFigures | None,
        *,
        budget_ms: float | None = None,
        deadline_unix_ms: float | None = None,
    ) -> None:
        self.budgets = budgets
        self.pipeline = pipeline
        self.figures = figures
        self.decisions: list[Decision] = []
        self.deadline_unix_ms: float | None = None
        self.inherited = False
        # A request of the holdout runs with every lever off: the control group whose
        # stage times tell what the levers save (docs/runtime.md, "Holdout").
        self.holdout = False
        self.span: trace.Span | None = None
        self._tracer: trace.Tracer | None = None
        self._budget_ms = budget_ms
        self._explicit_deadline = deadline_unix_ms
        self._deadline_mono = INFINITY
        self._token: object | None = None
        self._opened: set[str] = set()
        self._skipped: set[str] = set()

    # The request's life -------------------------------------------------------------

    def __enter__(self) -> "Request":
        now_ms = time.time() * 1000
        now_mono = time.monotonic()
        ctx = context.get_current()
        inherited = deadline_from_baggage(ctx)
        # The application's budget and the pipeline's are both its own: the earlier holds.
        lengths = (self._budget_ms, None if self.figures is None else self.figures.deadline_ms)
        own = [now_ms + length for length in lengths if length is not None]
        candidates = [
            value for value in (inherited, self._explicit_deadline, *own) if value is not None
        ]
        if candidates:
            deadline = min(candidates)
            self.deadline_unix_ms = deadline
            self.inherited = deadline == inherited
            self._deadline_mono = now_mono + (deadline - now_ms) / 1000
            if not self.inherited:
                ctx = baggage.set_baggage(protocol.BAGGAGE_DEADLINE, str(int(deadline)), ctx)
        # The first process of a request draws it into the holdout; the others follow.
        marked = baggage.get_baggage(protocol.BAGGAGE_HOLDOUT, ctx) == protocol.HOLDOUT_VALUE
        if marked:
            self.holdout = True
        elif inherited is None:
            percent = self.budgets.holdout_percent(self.figures)
            if percent > 0 and random.random() * 100 < percent:
                self.holdout = True
                ctx = baggage.set_baggage(protocol.BAGGAGE_HOLDOUT, protocol.HOLDOUT_VALUE, ctx)
        tracer = self._tracer = self.budgets.tracer()
        if tracer is not None:
            attributes: dict[str, Any] = {
                protocol.PIPELINE: self.pipeline,
                protocol.INHERITED: self.inherited,
            }
            if self.holdout:
                attributes[protocol.HOLDOUT] = True
            if self.deadline_unix_ms is not None:
                attributes[protocol.DEADLINE] = int(self.deadline_unix_ms)
            self.span = tracer.start_span(f"request {self.pipeline}", ctx, attributes=attributes)
            ctx = trace.set_span_in_context(self.span, ctx)
        if ctx is not context.get_current():
            self._token = context.attach(ctx)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.span is not None:
            if error is not None:
                self.span.record_exception(error)
                self.span.set_status(trace.StatusCode.ERROR, str(error)[:200])
            self.span.end()
        if self._token is not None:
            context.detach(self._token)  # type: ignore[arg-type]
            self._token = None

    async def __aenter__(self) -> "Request":
        return self.__enter__()

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.__exit__(kind, error, tb)

    # The deadline -------------------------------------------------------------------

    @property
    def remaining_ms(self) -> float:
        """Milliseconds to the deadline (negative once past it); infinite without one."""
        if math.isinf(self._deadline_mono):
            return INFINITY
        return (self._deadline_mono - time.monotonic()) * 1000

    @property
    def expired(self) -> bool:
        return self.remaining_ms <= 0

    def stage_figures(self, slug: str) -> StageFigures | None:
        return None if self.figures is None else self.figures.stage(slug)

    def saved_estimate(self, slug: str, elapsed_ms: float) -> float:
        """The estimate of time saved by leaving the stage's call after ``elapsed_ms``
        (0: by not calling it at all): the rest it was expected to take, from the
        stage's times without levers (``docs/runtime.md``); 0 without them."""
        stage = self.stage_figures(slug)
        if stage is None:
            return 0.0
        times = stage.unlevered
        return expected_rest_ms(times.p50, times.p99, elapsed_ms)

    def lever_policy(self, slug: str) -> StagePolicy:
        """The levers' settings for the stage: none acts in a request of the holdout."""
        if self.holdout:
            return NO_LEVERS
        stage = self.stage_figures(slug)
        return NO_POLICY if stage is None else stage.policy

    def timeout_for(self, slug: str, *, at: float | None = None) -> float:
        """The stage's budget in ms, clamped to what remains (never below 0); infinite
        when there is neither a budget nor a deadline. ``at``: a monotonic instant to
        count what remains from, instead of now."""
        stage = self.stage_figures(slug)
        allowance = INFINITY if stage is None or stage.budget_ms is None else stage.budget_ms
        if math.isinf(self._deadline_mono):
            return allowance
        now = time.monotonic() if at is None else at
        return max(min(allowance, (self._deadline_mono - now) * 1000), 0.0)

    def stage(self, slug: str) -> "StageScope":
        """A stage's span, carrying ``latency_budget.stage``: ``with req.stage("rerank"):``."""
        return StageScope(self, slug)

    # Levers ---------------------------------------------------------------------------

    def should_skip(self, slug: str) -> bool:
        """True (and recorded once) when what remains cannot cover the stage's p50 and the
        p50s of the later stages not yet opened; never without the figures to say so."""
        stage = self.stage_figures(slug)
        remaining = self.remaining_ms
        if stage is None or stage.observed.p50 is None or math.isinf(remaining):
            return False
        if not self.lever_policy(slug).allows(protocol.SKIP):
            return False
        assert self.figures is not None
        rest = sum(
            later.observed.p50 or 0.0
            for later in self.figures.stages
            if later.position > stage.position and later.slug not in self._opened
        )
        need = stage.observed.p50 + rest
        if remaining >= need:
            return False
        if slug not in self._skipped:
            self._skipped.add(slug)
            self.decide(
                slug,
                protocol.SKIP,
                f"remaining {_ms(remaining)} < {slug} p50 {_ms(stage.observed.p50)}"
                f" + rest p50 {_ms(rest)}",
                saved_ms=self.saved_estimate(slug, 0.0),
                remaining_ms=remaining,
            )
        return True

    def cap(self, slug: str, fn: Callable[[Attempt], T], fallback_value: T) -> T:
        """``fn``'s result, or ``fallback_value`` once it runs past ``timeout_for(slug)``."""
        from latency_budgets.levers import cap

        return cap(self, slug, fn, fallback_value)

    def hedge(
        self,
        fn: Callable[[Attempt], T],
        *,
        after: str | float | None = None,
        stage: str | None = None,
    ) -> T:
        """A second attempt after the stage's ``after`` percentile (or ms; by default the
        stage's policy or advice, else its p95); the first answer wins."""
        from latency_budgets.levers import hedge

        return hedge(self, fn, after=after, stage=stage)

    def fallback(
        self,
        primary: Callable[[Attempt], Iterable[T]],
        fallback: Callable[[Attempt], Iterable[T]],
        *,
        first_token_ms: float | None = None,
        stage: str | None = None,
        is_content: Callable[[Any], bool] | None = None,
    ) -> Iterator[T]:
        """The primary's stream, or the fallback's when no content chunk came in time."""
        from latency_budgets.levers import fallback as run

        return run(
            self, primary, fallback, first_token_ms=first_token_ms, stage=stage,
            is_content=is_content,
        )  # fmt: skip

    async def acap(self, slug: str, fn: Callable[[Attempt], Awaitable[T]], fallback_value: T) -> T:
        from latency_budgets.alevers import acap

        return await acap(self, slug, fn, fallback_value)

    async def ahedge(
        self,
        fn: Callable[[Attempt], Awaitable[T]],
        *,
        after: str | float | None = None,
        stage: str | None = None,
    ) -> T:
        from latency_budgets.alevers import ahedge

        return await ahedge(self, fn, after=after, stage=stage)

    def afallback(
        self,
        primary: Callable[[Attempt], AsyncIterator[T]],
        fallback: Callable[[Attempt], AsyncIterator[T]],
        *,
        first_token_ms: float | None = None,
        stage: str | None = None,
        is_content: Callable[[Any], bool] | None = None,
    ) -> AsyncIterator[T]:
        from latency_budgets.alevers import afallback

        return afallback(
            self, primary, fallback, first_token_ms=first_token_ms, stage=stage,
            is_content=is_content,
        )  # fmt: skip

    # Decisions ----------------------------------------------------------------------

    def decide(
        self,
        slug: str,
        action: str,
        reason: str,
        *,
        saved_ms: float = 0.0,
        remaining_ms: float | None = None,
        winner: str | None = None,
        span: trace.Span | None = None,
    ) -> Decision:
        """Record a decision: an event on the stage's span (the request's when the stage
        has none open), the request's list and the process's ledger."""
        decision = Decision(
            pipeline=self.pipeline,
            stage=slug,
            action=action,
            reason=reason,
            remaining_ms=self.remaining_ms if remaining_ms is None else remaining_ms,
            saved_ms=max(saved_ms, 0.0),
            winner=winner,
        )
        self.decisions.append(decision)
        self.budgets.ledger.record(decision)
        if span is None:
            current = _current_stage.get()
            if current is not None and current.request is self and current.slug == slug:
                span = current.span
        target = span if span is not None else self.span
        if target is not None:
            target.add_event(protocol.DECISION_EVENT, decision.attributes())
        return decision

    def lever_stage(self, slug: str | None) -> "tuple[StageScope, bool]":
        """The stage a lever acts in: the one named, else the open one. True when the lever
        opens it itself (and must close it)."""
        current = _current_stage.get()
        if current is not None and current.request is self and slug in (None, current.slug):
            return current, False
        if slug is None:
            raise ValueError("Name the stage, or call the lever inside `with req.stage(...)`.")
        return StageScope(self, slug), True


class StageScope:
    """A stage's span while its block runs; its allowance is fixed when it opens."""

    __slots__ = ("_allowance", "_stage_token", "_token", "request", "slug", "span", "started")

    def __init__(self, request: Request, slug: str) -> None:
        self.request = request
        self.slug = slug
        self.span: trace.Span | None = None
        self.started = 0.0
        self._allowance: float | None = None
        self._token: object | None = None
        self._stage_token: contextvars.Token[StageScope | None] | None = None

    @property
    def figures(self) -> StageFigures | None:
        return self.request.stage_figures(self.slug)

    @property
    def elapsed_ms(self) -> float:
        return (time.monotonic() - self.started) * 1000

    def open(self, *, attach: bool) -> "StageScope":
        """Start the span; with ``attach``, make it current in this context (a ``with``
        block). A lever that streams opens it unattached and runs its attempts under it."""
        request = self.request
        self.started = time.monotonic()
        request._opened.add(self.slug)
        tracer = request._tracer
        if tracer is not None:
            attributes: dict[str, Any] = {protocol.STAGE: self.slug}
            allowance = self.allowance_ms
            if not math.isinf(allowance):
                attributes[protocol.ALLOWANCE_MS] = round(allowance, 3)
            self.span = tracer.start_span(self.slug, attributes=attributes)
            if attach:
                self._token = context.attach(trace.set_span_in_context(self.span))
        if attach:
            self._stage_token = _current_stage.set(self)
        return self

    @property
    def allowance_ms(self) -> float:
        """``timeout_for`` the stage as it stood when the stage opened."""
        if self._allowance is None:
            self._allowance = self.request.timeout_for(self.slug, at=self.started)
        return self._allowance

    def run_context(self) -> contextvars.Context:
        """A context for an attempt: this stage current, with its span when it has one."""
        ctx = contextvars.copy_context()
        ctx.run(self._enter_copy)
        return ctx

    def _enter_copy(self) -> None:
        if self.span is not None:
            context.attach(trace.set_span_in_context(self.span))
        _current_stage.set(self)

    def close(self, error: BaseException | None = None) -> None:
        if isinstance(error, TimeoutError):
            self.request.decide(
                self.slug,
                protocol.TIMEOUT,
                f"timed out after {_ms(self.elapsed_ms)} (allowance {_ms(self.allowance_ms)})",
                span=self.span,
            )
        if self.span is not None:
            if error is not None:
                self.span.record_exception(error)
                self.span.set_status(trace.StatusCode.ERROR, str(error)[:200])
            self.span.end()
        if self._stage_token is not None:
            _current_stage.reset(self._stage_token)
            self._stage_token = None
        if self._token is not None:
            context.detach(self._token)  # type: ignore[arg-type]
            self._token = None

    def __enter__(self) -> "StageScope":
        return self.open(attach=True)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close(error)

    async def __aenter__(self) -> "StageScope":
        return self.open(attach=True)

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close(error)

    def first_token(self) -> None:
        """Mark the first token on the stage's span (the event the server splits at)."""
        if self.span is not None:
            self.span.add_event(protocol.FIRST_TOKEN_EVENT)

    def saved_after(self, elapsed_ms: float) -> float:
        return self.request.saved_estimate(self.slug, elapsed_ms)
