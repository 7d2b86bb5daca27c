"""The decisions the levers record, worded once for threads and asyncio alike."""

import math

from latency_budgets import protocol
from latency_budgets.attempts import Attempt
from latency_budgets.decisions import Decision
from latency_budgets.policies import StagePolicy
from latency_budgets.request import Request, StageScope, _ms


def capped(request: Request, scope: StageScope, allowance: float) -> Decision:
    return request.decide(
        scope.slug,
        protocol.CAP,
        f"{scope.slug} ran past its allowance of {_ms(allowance)}",
        saved_ms=scope.saved_after(allowance),
        span=scope.span,
    )


def hedge_won(
    request: Request,
    scope: StageScope,
    *,
    delay: float,
    after: str | float,
    winner: Attempt,
    elapsed_ms: float,
    remaining_ms: float,
) -> Decision:
    """Only a second attempt's win saves time: the first would have answered as it did."""
    second_won = winner.role == protocol.SECOND
    return request.decide(
        scope.slug,
        protocol.HEDGE,
        f"no answer after {_ms(delay)} ({after}); the {winner.role} attempt won",
        saved_ms=scope.saved_after(elapsed_ms) if second_won else 0.0,
        remaining_ms=remaining_ms,
        winner=winner.role,
        span=scope.span,
    )


def hedge_failed(
    request: Request, scope: StageScope, *, delay: float, after: str | float, remaining_ms: float
) -> Decision:
    return request.decide(
        scope.slug,
        protocol.HEDGE,
        f"no answer after {_ms(delay)} ({after}); both attempts failed",
        remaining_ms=remaining_ms,
        span=scope.span,
    )


def fell_back(request: Request, scope: StageScope, allowance: float) -> Decision:
    return request.decide(
        scope.slug,
        protocol.FALLBACK,
        f"no first token within {_ms(allowance)}",
        saved_ms=scope.saved_after(scope.elapsed_ms),
        winner=protocol.FALLBACK_ATTEMPT,
        span=scope.span,
    )


def _policy(scope: StageScope) -> StagePolicy:
    return scope.request.lever_policy(scope.slug)


def first_token_allowance(
    request: Request, scope: StageScope, first_token_ms: float | None
) -> float:
    """How long the primary has for its first content chunk: the time the call gives, else
    the stage's policy or advice, else its allowance; never past the deadline. Infinite
    when the policy leaves the fallback out: the primary streams whatever it takes."""
    policy = _policy(scope)
    if not policy.allows(protocol.FALLBACK):
        return math.inf
    if first_token_ms is None:
        first_token_ms = policy.first_token
    allowance = scope.allowance_ms if first_token_ms is None else first_token_ms
    return min(allowance, max(request.remaining_ms, 0.0))


def cap_allowance(request: Request, scope: StageScope) -> float:
    """How long a capped call may run: the policy's or advised cap, else the stage's
    budget, clamped to what remains; infinite when the policy leaves the cap out."""
    policy = _policy(scope)
    if not policy.allows(protocol.CAP):
        return math.inf
    cap = policy.cap
    if cap is None:
        return request.timeout_for(scope.slug)
    return max(min(cap, request.remaining_ms), 0.0)


def hedge_after(scope: StageScope, after: str | float | None) -> str | float | None:
    """When to send the second attempt: the call's ``after``, else the policy's or advised
    delay, else the stage's p95. None when the policy leaves the hedge out."""
    policy = _policy(scope)
    if not policy.allows(protocol.HEDGE):
        return None
    if after is not None:
        return after
    advised = policy.hedge
    return "p95" if advised is None else advised
