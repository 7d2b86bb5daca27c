"""Running one item of a shared pass so that its failure stays its own.

A pass first tries its whole group of items at once, inside a savepoint: that is
the common case and costs one savepoint per pass, not one per item. Only when the
group fails does it go item by item, each in a savepoint of its own, to find the
items at fault; those are quarantined and everyone else's work commits.

Failures of the database itself (a lost connection, a deadlock, a lock timeout)
are nobody's item: they propagate, the pass rolls back whole and runs again later.
A statement cancelled by ``statement_timeout`` is the item's own: it ran past its
time budget.
"""

import signal
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import psycopg.errors
from billiard.exceptions import SoftTimeLimitExceeded
from django.db import InterfaceError, OperationalError, connection, transaction

T = TypeVar("T")
R = TypeVar("R")


class ItemTimeout(Exception):
    """An item ran past its time budget."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"ran past its time budget of {seconds:g} s")


def is_transient(exc: BaseException) -> bool:
    """True for failures that belong to the pass, not to the item being processed."""
    if isinstance(exc, SoftTimeLimitExceeded | InterfaceError):
        return True
    if isinstance(exc, OperationalError):
        return not isinstance(exc.__cause__, psycopg.errors.QueryCanceled)
    return False


def failure_reason(exc: BaseException) -> str:
    """One line for operators: the exception's type and message."""
    if isinstance(exc, OperationalError) and isinstance(
        exc.__cause__, psycopg.errors.QueryCanceled
    ):
        return "ran past its time budget (statement timeout)"
    if isinstance(exc, ItemTimeout):
        return str(exc)
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def statement_timeout_set(seconds: float) -> None:
    """Bound every statement of the current transaction (``SET LOCAL``)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT set_config('statement_timeout', %s, true)", [f"{seconds * 1000:.0f}"]
        )


class ItemDeadline:
    """A time budget per item of a computation loop: ``restart()`` before each item,
    ``stop()`` after it; past the budget the item is interrupted with ``ItemTimeout``.

    For pure computation only, never around database calls: the alarm (SIGALRM) raises
    at any bytecode. The handler is installed once per loop, so an item costs one
    ``setitimer`` call. Outside the main thread, where signals cannot be used, an item
    runs to its end and ``stop()`` judges it then.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._signals = False
        self._armed = False
        self._started = 0.0
        self._previous: Any = None

    def __enter__(self) -> "ItemDeadline":
        self._signals = self.seconds > 0 and threading.current_thread() is threading.main_thread()
        if self._signals:
            self._previous = signal.signal(signal.SIGALRM, self._expired)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.disarm()
        if self._signals:
            signal.signal(signal.SIGALRM, self._previous)

    def _expired(self, signum: int, frame: object) -> None:
        if self._armed:
            self._armed = False
            raise ItemTimeout(self.seconds)

    def restart(self) -> None:
        self._started = time.monotonic()
        if self._signals:
            self._armed = True
            signal.setitimer(signal.ITIMER_REAL, self.seconds)

    def stop(self) -> None:
        """End the item's budget; raises ``ItemTimeout`` if it overran unnoticed."""
        self.disarm()
        if self.seconds > 0 and time.monotonic() - self._started > self.seconds:
            raise ItemTimeout(self.seconds)

    def disarm(self) -> None:
        if self._armed:
            self._armed = False
            signal.setitimer(signal.ITIMER_REAL, 0)


def each_isolated(
    items: Sequence[T],
    work: Callable[[Sequence[T]], R],
    *,
    on_failure: Callable[[T, BaseException], None],
) -> list[R]:
    """``work`` over all the items at once, or, if that fails, over each item alone.

    Returns the results that committed: one for the whole group, or one per item
    that succeeded. ``on_failure`` runs for each item that failed on its own, after
    its savepoint was rolled back (it may write: its writes commit with the pass).
    """
    if not items:
        return []
    try:
        with transaction.atomic():
            return [work(items)]
    except Exception as exc:
        if is_transient(exc):
            raise
        if len(items) == 1:
            on_failure(items[0], exc)
            return []
    results: list[R] = []
    for item in items:
        try:
            with transaction.atomic():
                results.append(work([item]))
        except Exception as exc:
            if is_transient(exc):
                raise
            on_failure(item, exc)
    return results
