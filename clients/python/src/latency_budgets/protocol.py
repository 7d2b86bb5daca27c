"""The names a client and the server share (the server's ``docs/runtime.md``).

Change one only together with the server and the docs: the server reads them from any
client, in any language.
"""

# W3C baggage member: the request's deadline, absolute Unix time in whole milliseconds.
BAGGAGE_DEADLINE = "latency_budget.deadline"
# W3C baggage member, "1" on a request of the holdout (run without levers).
BAGGAGE_HOLDOUT = "latency_budget.holdout"
HOLDOUT_VALUE = "1"

# On the request's span.
PIPELINE = "latency_budget.pipeline"
DEADLINE = "latency_budget.deadline"
INHERITED = "latency_budget.inherited"
HOLDOUT = "latency_budget.holdout"

# On a stage's span, and on each decision event.
STAGE = "latency_budget.stage"
ALLOWANCE_MS = "latency_budget.allowance_ms"

# The decision event and its attributes.
DECISION_EVENT = "latency_budget.decision"
ACTION = "latency_budget.action"
REASON = "latency_budget.reason"
REMAINING_MS = "latency_budget.remaining_ms"
SAVED_MS = "latency_budget.saved_ms"
WINNER = "latency_budget.winner"

SKIP = "skip"
FALLBACK = "fallback"
HEDGE = "hedge"
CAP = "cap"
TIMEOUT = "timeout"
ACTIONS = (SKIP, FALLBACK, HEDGE, CAP, TIMEOUT)

# Winners of a fallback and of a hedge.
PRIMARY = "primary"
FALLBACK_ATTEMPT = "fallback"
FIRST = "first"
SECOND = "second"

# The event the server reads as an LLM span's first token, when no attribute gives it.
FIRST_TOKEN_EVENT = "first_token"  # noqa: S105 - an event name
