"""The levers for asyncio: each attempt is a task, and a losing one is cancelled as such,
which closes its connection (the server sees the client go)."""

import asyncio
import contextlib
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from latency_budgets import protocol, verdicts
from latency_budgets.attempts import Attempt
from latency_budgets.delays import hedge_delay_ms
from latency_budgets.request import Request, StageScope
from latency_budgets.streams import is_content_chunk

T = TypeVar("T")


def _task(scope: StageScope, awaitable: Awaitable[T], attempt: Attempt) -> "asyncio.Task[T]":
    async def run() -> T:
        return await awaitable

    task = asyncio.get_running_loop().create_task(run(), context=scope.run_context())
    attempt.on_cancel(task.cancel)
    return task


async def acap(
    request: Request, slug: str, fn: Callable[[Attempt], Awaitable[T]], fallback_value: T
) -> T:
    scope, owned = request.lever_stage(slug)
    if owned:
        scope.open(attach=True)
    error: BaseException | None = None
    attempt = Attempt(1, "capped")
    try:
        allowance = verdicts.cap_allowance(request, scope)
        if math.isinf(allowance):
            return await fn(attempt)
        task = _task(scope, fn(attempt), attempt)
        done, _ = await asyncio.wait({task}, timeout=allowance / 1000)
        if done:
            return task.result()
        attempt.cancel()
        verdicts.capped(request, scope, allowance)
        return fallback_value
    except BaseException as exc:
        error = exc
        # The caller was cancelled, or failed: the call does not outlive the lever.
        attempt.cancel()
        raise
    finally:
        if owned:
            scope.close(error)


async def ahedge(
    request: Request,
    fn: Callable[[Attempt], Awaitable[T]],
    *,
    after: str | float | None = None,
    stage: str | None = None,
) -> T:
    scope, owned = request.lever_stage(stage)
    if owned:
        scope.open(attach=True)
    error: BaseException | None = None
    attempts: dict[asyncio.Task[T], Attempt] = {}
    try:
        chosen = verdicts.hedge_after(scope, after)
        delay = None if chosen is None else hedge_delay_ms(scope.figures, chosen)
        first = Attempt(1, protocol.FIRST)
        if delay is None or request.remaining_ms <= delay:
            return await fn(first)
        assert chosen is not None  # a delay was found for it
        started = time.monotonic()
        attempts[_task(scope, fn(first), first)] = first
        done, _ = await asyncio.wait(set(attempts), timeout=delay / 1000)
        if done:
            return next(iter(done)).result()
        second = Attempt(2, protocol.SECOND)
        attempts[_task(scope, fn(second), second)] = second
        remaining = request.remaining_ms
        pending = set(attempts)
        failures: list[BaseException] = []
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                failure = task.exception()
                if failure is not None:
                    failures.append(failure)
                    continue
                attempt = attempts[task]
                for loser in pending:
                    attempts[loser].cancel()
                elapsed = (time.monotonic() - started) * 1000
                verdicts.hedge_won(
                    request, scope, delay=delay, after=chosen, winner=attempt,
                    elapsed_ms=elapsed, remaining_ms=remaining,
                )  # fmt: skip
                return task.result()
        verdicts.hedge_failed(request, scope, delay=delay, after=chosen, remaining_ms=remaining)
        raise failures[0]
    except BaseException as exc:
        error = exc
        # The caller was cancelled, or failed: no attempt outlives the lever.
        for attempt in attempts.values():
            attempt.cancel()
        raise
    finally:
        if owned:
            scope.close(error)


def afallback(
    request: Request,
    primary: Callable[[Attempt], AsyncIterator[T]],
    fallback: Callable[[Attempt], AsyncIterator[T]],
    *,
    first_token_ms: float | None = None,
    stage: str | None = None,
    is_content: Callable[[Any], bool] | None = None,
) -> AsyncIterator[T]:
    scope, owned = request.lever_stage(stage)
    if owned:
        scope.open(attach=False)
    return _afallback_stream(
        request, scope, owned, primary, fallback, first_token_ms, is_content or is_content_chunk
    )


async def _aclose(stream: AsyncIterator[Any]) -> None:
    close = getattr(stream, "aclose", None)
    if close is not None:
        # A stream that fails to close is closed enough.
        with contextlib.suppress(Exception):
            await close()


async def _afallback_stream(
    request: Request,
    scope: StageScope,
    owned: bool,
    primary: Callable[[Attempt], AsyncIterator[T]],
    fallback: Callable[[Attempt], AsyncIterator[T]],
    first_token_ms: float | None,
    content: Callable[[Any], bool],
) -> AsyncIterator[T]:
    error: BaseException | None = None
    first = Attempt(1, protocol.PRIMARY)
    second = Attempt(2, protocol.FALLBACK_ATTEMPT)
    stream: AsyncIterator[T] | None = None
    try:
        allowance = verdicts.first_token_allowance(request, scope, first_token_ms)
        ctx = scope.run_context()
        stream = ctx.run(primary, first)
        held: list[T] = []
        deadline = time.monotonic() + allowance / 1000
        started_content = False
        while not started_content:
            left = deadline - time.monotonic()
            step = asyncio.get_running_loop().create_task(_next(stream), context=ctx)
            done, _ = await asyncio.wait({step}, timeout=None if math.isinf(left) else max(left, 0))
            if not done:
                step.cancel()
                break
            ended, chunk = step.result()
            if ended:
                for item in held:
                    yield item
                return
            if not content(chunk):
                held.append(chunk)
                continue
            started_content = True
            scope.first_token()
            for item in held:
                yield item
            yield chunk
        if started_content:
            while True:
                ended, chunk = await asyncio.get_running_loop().create_task(
                    _next(stream), context=ctx
                )
                if ended:
                    return
                yield chunk
        first.cancel()
        await _aclose(stream)
        verdicts.fell_back(request, scope, allowance)
        fallback_ctx = scope.run_context()
        stream = fallback_ctx.run(fallback, second)
        marked = False
        while True:
            ended, chunk = await asyncio.get_running_loop().create_task(
                _next(stream), context=fallback_ctx
            )
            if ended:
                return
            if not marked and content(chunk):
                scope.first_token()
                marked = True
            yield chunk
    except GeneratorExit:
        first.cancel()
        second.cancel()
        raise
    except BaseException as exc:
        error = exc
        first.cancel()
        second.cancel()
        raise
    finally:
        if owned:
            scope.close(error)


async def _next(stream: AsyncIterator[T]) -> tuple[bool, Any]:
    try:
        return False, await anext(stream)
    except StopAsyncIteration:
        return True, None
