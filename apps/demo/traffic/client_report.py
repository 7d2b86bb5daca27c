"""What a run through the client sent, and what the client decided by its own count."""

import threading
from collections import Counter
from concurrent.futures import Future
from dataclasses import dataclass, field

from apps.demo.traffic.client_app import RequestOutcome


@dataclass(frozen=True)
class ClientRunReport:
    """What a run sent and what the client decided, by its own count."""

    pipeline: str
    requests: int  # served to the end; cut-short ones are left out of every figure
    failed: int
    with_deadline: int
    within_deadline: int
    cut_short: int
    broken: int  # requests the application itself failed to serve (a bug, not a plan)
    not_sent: int  # due while every thread was busy
    elapsed_s: float
    deadline_ms: float | None  # the pipeline's, as the client last read it
    decisions: dict[tuple[str, str], int] = field(default_factory=dict)  # (stage, action)
    saved_ms: dict[tuple[str, str], float] = field(default_factory=dict)
    first_error: str | None = None
    holdout: int = 0  # of the requests, those the client ran with every lever off

    @property
    def within_share(self) -> float | None:
        """Share of the requests with a deadline that finished within it."""
        return self.within_deadline / self.with_deadline if self.with_deadline else None

    def decision_count(self, *, action: str, stage: str | None = None) -> int:
        return sum(
            count
            for (where, what), count in self.decisions.items()
            if what == action and (stage is None or where == stage)
        )

    def lines(self) -> list[str]:
        lines = [
            f"Served {self.requests} requests through the client in {self.elapsed_s:.1f} s "
            f"({self.failed} failed as planned, {self.cut_short} cut short by the stop)"
        ]
        share = self.within_share
        if share is None:
            lines.append(
                f"No deadline: the server had no budgets for {self.pipeline} yet, so the "
                "client did not act"
            )
        else:
            deadline = "" if self.deadline_ms is None else f" ({self.deadline_ms:g} ms)"
            lines.append(
                f"Within the deadline{deadline}: {share:.1%} of {self.with_deadline} requests"
            )
        if self.holdout:
            lines.append(f"Run without levers (the holdout): {self.holdout} requests")
        if self.decisions:
            counted = ", ".join(
                f"{stage} {action} {count}"
                for (stage, action), count in sorted(self.decisions.items())
            )
            lines.append(f"Client decisions: {counted}")
        else:
            lines.append("Client decisions: none")
        if self.not_sent:
            lines.append(f"{self.not_sent} requests not sent: every thread was busy")
        if self.broken:
            lines.append(f"{self.broken} requests broke: {self.first_error}")
        return lines


@dataclass
class RequestTally:
    """Outcomes as the requests' threads finish them."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    outcomes: Counter[str] = field(default_factory=Counter)
    first_error: str | None = None

    def add(self, future: "Future[RequestOutcome]") -> None:
        error = future.exception()
        with self.lock:
            if error is not None:
                self.outcomes["broken"] += 1
                self.first_error = self.first_error or f"{type(error).__name__}: {error}"
                return
            outcome = future.result()
            if outcome.cut_short:
                self.outcomes["cut_short"] += 1
                return
            self.outcomes["requests"] += 1
            self.outcomes["failed"] += outcome.failed
            self.outcomes["with_deadline"] += outcome.had_deadline
            self.outcomes["within_deadline"] += outcome.within_deadline
            self.outcomes["holdout"] += outcome.holdout
