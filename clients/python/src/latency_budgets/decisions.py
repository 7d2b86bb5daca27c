"""What a lever decided, and the process's own count of every decision."""

import math
import threading
from collections import Counter
from dataclasses import dataclass

from latency_budgets import protocol


@dataclass(frozen=True, slots=True)
class Decision:
    pipeline: str
    stage: str
    action: str
    reason: str
    remaining_ms: float
    saved_ms: float
    winner: str | None = None

    def attributes(self) -> dict[str, str | float]:
        """The decision event's attributes (``docs/runtime.md``)."""
        attributes: dict[str, str | float] = {
            protocol.STAGE: self.stage,
            protocol.ACTION: self.action,
            protocol.REASON: self.reason,
            # An attribute must be finite: without a deadline, what remains is unbounded.
            protocol.REMAINING_MS: round(self.remaining_ms, 3)
            if math.isfinite(self.remaining_ms)
            else -1.0,
            protocol.SAVED_MS: round(max(self.saved_ms, 0.0), 3),
        }
        if self.winner is not None:
            attributes[protocol.WINNER] = self.winner
        return attributes


class Ledger:
    """Decisions counted by (pipeline, stage, action), for the whole process.

    The server counts the same decisions from the traces; this count is the client's
    side of it, for tests, logs and the application's own metrics.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[tuple[str, str, str]] = Counter()
        self._saved_ms: dict[tuple[str, str, str], float] = {}

    def record(self, decision: Decision) -> None:
        key = (decision.pipeline, decision.stage, decision.action)
        with self._lock:
            self._counts[key] += 1
            self._saved_ms[key] = self._saved_ms.get(key, 0.0) + max(decision.saved_ms, 0.0)

    def counts(self) -> dict[tuple[str, str, str], int]:
        with self._lock:
            return dict(self._counts)

    def saved_ms(self) -> dict[tuple[str, str, str], float]:
        with self._lock:
            return dict(self._saved_ms)

    def total(self, *, pipeline: str | None = None, action: str | None = None) -> int:
        with self._lock:
            return sum(
                count
                for (p, _, a), count in self._counts.items()
                if (pipeline is None or p == pipeline) and (action is None or a == action)
            )

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()
            self._saved_ms.clear()
