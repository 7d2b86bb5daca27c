"""The levers for threads: cap, hedge and fallback with the calls on worker threads.

A blocked call cannot be interrupted from another thread, so the caller waits on a
future with a timeout and cancels the losing ``Attempt`` (its ``on_cancel`` callbacks
close what it reads from). Each attempt runs in a copy of the caller's context with the
stage's span current, so the spans it makes nest under the stage.
"""

import math
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, TypeVar

from latency_budgets import protocol, verdicts
from latency_budgets.attempts import Attempt
from latency_budgets.delays import hedge_delay_ms
from latency_budgets.request import Request, StageScope
from latency_budgets.streams import is_content_chunk

T = TypeVar("T")
# Attempts run here; a cancelled attempt that ignores its cancellation keeps a thread
# until it returns, so the pool is generous.
MAX_WORKERS = 64

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def executor() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = ThreadPoolExecutor(MAX_WORKERS, thread_name_prefix="latency-budgets")
    return _pool


def _submit(scope: StageScope, fn: Callable[[Attempt], T], attempt: Attempt) -> Future[T]:
    return executor().submit(scope.run_context().run, fn, attempt)


def cap(request: Request, slug: str, fn: Callable[[Attempt], T], fallback_value: T) -> T:
    scope, owned = request.lever_stage(slug)
    if owned:
        scope.open(attach=True)
    error: BaseException | None = None
    try:
        allowance = verdicts.cap_allowance(request, scope)
        attempt = Attempt(1, "capped")
        if math.isinf(allowance):
            return fn(attempt)
        future = _submit(scope, fn, attempt)
        try:
            return future.result(timeout=allowance / 1000)
        except TimeoutError:
            if future.done():  # it finished after all, or itself raised TimeoutError
                return future.result()
        attempt.cancel()
        verdicts.capped(request, scope, allowance)
        return fallback_value
    except BaseException as exc:
        error = exc
        raise
    finally:
        if owned:
            scope.close(error)


def hedge(
    request: Request,
    fn: Callable[[Attempt], T],
    *,
    after: str | float | None = None,
    stage: str | None = None,
) -> T:
    scope, owned = request.lever_stage(stage)
    if owned:
        scope.open(attach=True)
    error: BaseException | None = None
    try:
        chosen = verdicts.hedge_after(scope, after)
        delay = None if chosen is None else hedge_delay_ms(scope.figures, chosen)
        first = Attempt(1, protocol.FIRST)
        if delay is None or request.remaining_ms <= delay:
            # No figure to hedge after, or no time left for a second attempt to help.
            return fn(first)
        assert chosen is not None  # a delay was found for it
        started = time.monotonic()
        pending: dict[Future[T], Attempt] = {_submit(scope, fn, first): first}
        done, _ = wait(pending, timeout=delay / 1000)
        if done:
            return next(iter(done)).result()
        second = Attempt(2, protocol.SECOND)
        pending[_submit(scope, fn, second)] = second
        remaining = request.remaining_ms
        failures: list[BaseException] = []
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                attempt = pending.pop(future)
                failure = future.exception()
                if failure is not None:
                    failures.append(failure)
                    continue
                for loser in pending.values():
                    loser.cancel()
                elapsed = (time.monotonic() - started) * 1000
                verdicts.hedge_won(
                    request, scope, delay=delay, after=chosen, winner=attempt,
                    elapsed_ms=elapsed, remaining_ms=remaining,
                )  # fmt: skip
                return future.result()
        verdicts.hedge_failed(request, scope, delay=delay, after=chosen, remaining_ms=remaining)
        raise failures[0]
    except BaseException as exc:
        error = exc
        raise
    finally:
        if owned:
            scope.close(error)


_END = object()


def _pump(
    make: Callable[[Attempt], Iterable[T]], attempt: Attempt,
    into: "queue.Queue[tuple[Any, BaseException | None]]",
) -> None:  # fmt: skip
    """Read the stream on a worker thread into ``into``: chunks, then the end or an error.
    Run in the stage's context as a whole: a generator's body runs on each ``next``."""
    try:
        iterator = iter(make(attempt))
        for chunk in iterator:
            if attempt.cancelled.is_set():
                break
            into.put((chunk, None))
        close = getattr(iterator, "close", None)
        if attempt.cancelled.is_set() and close is not None:
            close()
        into.put((_END, None))
    except BaseException as exc:
        into.put((_END, None if attempt.cancelled.is_set() else exc))


def fallback(
    request: Request,
    primary: Callable[[Attempt], Iterable[T]],
    fallback: Callable[[Attempt], Iterable[T]],
    *,
    first_token_ms: float | None = None,
    stage: str | None = None,
    is_content: Callable[[Any], bool] | None = None,
) -> Iterator[T]:
    content = is_content or is_content_chunk
    scope, owned = request.lever_stage(stage)
    # Opened here, not when the generator starts: the allowance counts from the call.
    if owned:
        scope.open(attach=False)
    return _fallback_stream(request, scope, owned, primary, fallback, first_token_ms, content)


def _fallback_stream(
    request: Request,
    scope: StageScope,
    owned: bool,
    primary: Callable[[Attempt], Iterable[T]],
    fallback: Callable[[Attempt], Iterable[T]],
    first_token_ms: float | None,
    content: Callable[[Any], bool],
) -> Iterator[T]:
    error: BaseException | None = None
    first = Attempt(1, protocol.PRIMARY)
    second = Attempt(2, protocol.FALLBACK_ATTEMPT)
    try:
        allowance = verdicts.first_token_allowance(request, scope, first_token_ms)
        chunks: queue.Queue[tuple[Any, BaseException | None]] = queue.Queue()
        ctx = scope.run_context()
        executor().submit(ctx.run, _pump, primary, first, chunks)
        held: list[Any] = []  # keep-alives before the first content chunk
        deadline = time.monotonic() + allowance / 1000
        while True:
            left = deadline - time.monotonic()
            try:
                chunk, failure = chunks.get(timeout=None if math.isinf(left) else max(left, 0))
            except queue.Empty:
                break  # no content in time: fall back
            if chunk is _END:
                if failure is not None:
                    raise failure
                yield from held  # a stream that ended without content
                return
            if not content(chunk):
                held.append(chunk)
                continue
            scope.first_token()
            yield from held
            yield chunk
            while True:
                chunk, failure = chunks.get()
                if chunk is _END:
                    if failure is not None:
                        raise failure
                    return
                yield chunk
        first.cancel()
        verdicts.fell_back(request, scope, allowance)
        fallback_ctx = scope.run_context()
        stream = iter(fallback_ctx.run(fallback, second))
        close = getattr(stream, "close", None)
        if close is not None:
            second.on_cancel(close)
        marked = False
        while True:
            try:
                chunk = fallback_ctx.run(next, stream)
            except StopIteration:
                return
            if not marked and content(chunk):
                scope.first_token()
                marked = True
            yield chunk
    except GeneratorExit:
        # The reader stopped early: so does the stream it was reading.
        first.cancel()
        second.cancel()
        raise
    except BaseException as exc:
        error = exc
        raise
    finally:
        if owned:
            scope.close(error)
