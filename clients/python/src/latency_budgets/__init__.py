"""Run-time latency budgets: a deadline per request, an allowance per stage, and levers
that degrade a costly step before the budget breaks, each decision on the trace."""

from latency_budgets.attempts import Attempt
from latency_budgets.budgets import VERSION as __version__
from latency_budgets.budgets import Budgets
from latency_budgets.decisions import Decision, Ledger
from latency_budgets.figures import (
    DocumentError,
    Observed,
    PipelineFigures,
    StageFigures,
)
from latency_budgets.request import Request, StageScope, deadline_from_baggage
from latency_budgets.streams import is_content_chunk

__all__ = [
    "Attempt",
    "Budgets",
    "Decision",
    "DocumentError",
    "Ledger",
    "Observed",
    "PipelineFigures",
    "Request",
    "StageFigures",
    "StageScope",
    "__version__",
    "deadline_from_baggage",
    "is_content_chunk",
]
