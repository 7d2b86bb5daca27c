"""The run-time client's holdout: requests run with every lever off, a control group
whose stage times say what the levers save (``docs/runtime.md``, "Holdout").

The client marks the request's span; any span of the trace carrying the mark puts the
whole trace in the holdout, since the request's span need not be the root (a server
span of the application may hold it).
"""

from collections.abc import Iterable

from apps.analysis.spans import Span

HOLDOUT = "latency_budget.holdout"


def trace_in_holdout(spans: Iterable[Span]) -> bool:
    # Only a boolean true counts: a string "false" from a careless client must not.
    return any(span.attributes.get(HOLDOUT) is True for span in spans)
