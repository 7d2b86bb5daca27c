"""One attempt of a lever's call, and how it is cancelled.

A thread cannot be stopped from outside, so a function run by a lever receives its
``Attempt`` and registers what closes it (``attempt.on_cancel(response.close)``), or
checks ``attempt.cancelled`` in its loop. An ``asyncio`` attempt is also a task, which
the lever cancels.
"""

import logging
import threading
from collections.abc import Callable

logger = logging.getLogger("latency_budgets")


class Attempt:
    __slots__ = ("_callbacks", "_lock", "cancelled", "number", "role")

    def __init__(self, number: int, role: str) -> None:
        self.number = number
        self.role = role  # "first"/"second" for a hedge, "primary"/"fallback", "capped"
        self.cancelled = threading.Event()
        self._callbacks: list[Callable[[], object]] = []
        self._lock = threading.Lock()

    def on_cancel(self, callback: Callable[[], object]) -> None:
        """Run ``callback`` when the attempt is cancelled (at once if it already was)."""
        with self._lock:
            if not self.cancelled.is_set():
                self._callbacks.append(callback)
                return
        _call(callback)

    def cancel(self) -> None:
        with self._lock:
            if self.cancelled.is_set():
                return
            self.cancelled.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            _call(callback)

    def __repr__(self) -> str:
        state = "cancelled" if self.cancelled.is_set() else "live"
        return f"<Attempt {self.number} {self.role} {state}>"


def _call(callback: Callable[[], object]) -> None:
    try:
        callback()
    except Exception:  # a closer that fails must not stop the lever's own answer
        logger.warning("latency budgets: a cancel callback failed", exc_info=True)
