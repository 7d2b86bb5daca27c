"""Running one item of a shared pass so that its failure stays its own.

A pass first runs whole, in its one transaction and without savepoints: the common
case costs nothing (a savepoint would make every row it writes carry a
subtransaction id, which every later reader of those rows pays for). Only when the
database refuses something does the pass roll back and run again item by item, each
in a savepoint of its own, to find the items at fault (``pass_with_fallback`` and
``items_run``); those are quarantined and everyone else's work commits. A failure in
Python (analysis) is caught per item without any of this.

Failures of the database itself (a lost connection, a deadlock, a lock timeout,
writes refused) are nobody's item: they propagate, the pass rolls back whole and runs
again later.
A statement cancelled by ``statement_timeout`` is the item's own: it ran past its
time budget.
"""

import logging
import signal
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import psycopg.errors
from billiard.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import InterfaceError, InternalError, OperationalError, connection, transaction

logger = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")


class ItemTimeout(Exception):
    """An item ran past its time budget."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"ran past its time budget of {seconds:g} s")


class ServiceAway(Exception):
    """A service a pass writes to or reads from (a store, a replica, its coordinator) is
    away: the failure belongs to the pass, which is redone later, not to its items."""


def is_transient(exc: BaseException) -> bool:
    """True for failures that belong to the pass, not to the item being processed."""
    if isinstance(exc, SoftTimeLimitExceeded | InterfaceError | ServiceAway):
        return True
    if isinstance(exc, OperationalError):
        return not isinstance(exc.__cause__, psycopg.errors.QueryCanceled)
    # A database refusing every write (a demoted primary, a storage guard) refuses the
    # whole pass; redone item by item, each item would be blamed for it.
    return isinstance(exc, InternalError) and isinstance(
        exc.__cause__, psycopg.errors.ReadOnlySqlTransaction
    )


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


def pass_statement_timeout() -> None:
    """Bound every statement of the current transaction by ``PASS_STATEMENT_TIMEOUT_S``."""
    milliseconds = f"{settings.PASS_STATEMENT_TIMEOUT_S * 1000:.0f}"
    with connection.cursor() as cursor:  # SET LOCAL: it ends with the pass's transaction
        cursor.execute("SELECT set_config('statement_timeout', %s, true)", [milliseconds])


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


def pass_with_fallback(run: Callable[[bool], R]) -> R:
    """``run(False)``: the pass whole; if an item made it fail, ``run(True)``: item by item.

    ``run`` opens its own transaction, so the failed attempt is rolled back entirely
    (quarantine records included) before the second one claims the same items again.
    """
    try:
        return run(False)
    except Exception as exc:
        if is_transient(exc):
            raise
        logger.warning("pass redone item by item after: %s", failure_reason(exc))
        return run(True)


def items_run(
    items: Sequence[T],
    work: Callable[[Sequence[T]], R],
    *,
    isolate: bool,
    on_failure: Callable[[T, BaseException], None],
) -> list[R]:
    """``work`` over all the items at once, or with ``isolate`` over each item alone.

    Isolated, each item runs in a savepoint; ``on_failure`` runs for each item that
    failed, after its savepoint was rolled back (its writes commit with the pass).
    Returns the results that will commit: one for the group, or one per item.
    """
    if not items:
        return []
    if not isolate:
        return [work(items)]
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
