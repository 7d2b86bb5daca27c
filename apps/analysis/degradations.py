"""The decisions a run-time client recorded on a trace's spans, as ledger rows.

A client records each decision as a span event ``latency_budget.decision`` with the
attributes of ``docs/runtime.md``; any client in any language may send them, so every
value is checked here and an event that does not follow the protocol is left out (it
stays on the span, in the trace's waterfall).
"""

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from apps.analysis.models import DegradationAction, DegradationWinner

if TYPE_CHECKING:
    from apps.analysis.spans import Span

DECISION_EVENT = "latency_budget.decision"
STAGE = "latency_budget.stage"
ACTION = "latency_budget.action"
SAVED_MS = "latency_budget.saved_ms"
WINNER = "latency_budget.winner"

ACTIONS = {action.label: action.value for action in DegradationAction}
WINNERS = {winner.label: winner.value for winner in DegradationWinner if winner.value}
# A trace holds at most this many decisions in the ledger: a client stuck in a loop
# must not make one trace a million rows.
MAX_DECISIONS_PER_TRACE = 100
# An estimate past a day is no estimate of a request's time.
MAX_SAVED_MS = 86_400_000.0

# One ledger row in ``DEGRADATION_COLUMNS`` order.
DegradationRow = tuple[int, int, int, int, int, int, int, int, int, int, bool]
DEGRADATION_COLUMNS = (
    "trace_pk", "seq", "start_ns", "team_id", "pipeline_id", "stage_id", "action", "winner",
    "saved_ns", "e2e_ns", "rescued",
)  # fmt: skip
DEGRADATION_TYPES = (
    "int8", "int2", "int8", "int8", "int8", "int8", "int2", "int2", "int8", "int8", "bool",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class SpanDecision:
    time_ns: int
    stage: str
    action: int
    winner: int
    saved_ns: int


def span_decision(event: dict[str, Any]) -> SpanDecision | None:
    """A stored event as a decision, or None when it is none or breaks the protocol."""
    attributes = event.get("attributes")
    if event.get("name") != DECISION_EVENT or not isinstance(attributes, dict):
        return None
    stage, action_name, time_ns = (
        attributes.get(STAGE),
        attributes.get(ACTION),
        event.get("time_ns"),
    )
    if not (isinstance(stage, str) and isinstance(action_name, str) and isinstance(time_ns, int)):
        return None
    action = ACTIONS.get(action_name)
    if action is None:
        return None
    saved = attributes.get(SAVED_MS, 0)
    if isinstance(saved, bool) or not isinstance(saved, int | float) or not math.isfinite(saved):
        saved = 0
    saved_ms = min(max(float(saved), 0.0), MAX_SAVED_MS)
    winner_name = attributes.get(WINNER)
    winner = WINNERS.get(winner_name, 0) if isinstance(winner_name, str) else 0
    return SpanDecision(time_ns, stage, action, winner, round(saved_ms * 1_000_000))


def rescued(e2e_ns: int, saved_ns: int, deadline_ms: int | None) -> bool:
    """Met the deadline, and would have broken it had the decisions not saved their time."""
    if deadline_ms is None:
        return False
    deadline_ns = deadline_ms * 1_000_000
    return e2e_ns <= deadline_ns < e2e_ns + saved_ns


def degradation_rows(
    trace_pk: int,
    team_id: int,
    pipeline_id: int,
    root: "Span",
    spans: Iterable["Span"],
    stage_ids: dict[str, int],
    deadline_ms: int | None,
) -> list[DegradationRow]:
    """The ledger rows of one analysed trace: its decisions naming a stage of its
    pipeline, in event order. A decision naming no stage of the pipeline is left out:
    the ledger counts per stage."""
    decisions = sorted(
        (decision.time_ns, span.span_id, index, decision)
        for span in spans
        for index, decision in enumerate(span.decisions)
        if decision.stage in stage_ids
    )[:MAX_DECISIONS_PER_TRACE]
    if not decisions:
        return []
    e2e_ns = root.duration_ns
    saved_ns = sum(decision.saved_ns for *_, decision in decisions)
    was_rescued = rescued(e2e_ns, saved_ns, deadline_ms)
    return [
        (
            trace_pk,
            seq,
            root.start_ns,
            team_id,
            pipeline_id,
            stage_ids[decision.stage],
            decision.action,
            decision.winner,
            decision.saved_ns,
            e2e_ns,
            was_rescued,
        )
        for seq, (*_, decision) in enumerate(decisions)
    ]
