"""The percentiles a budget is set at and figures are shown for, and the quantile each names.

One list for the whole product: budgets, rollups, what-if, the API and /metrics all offer
these four, in this order.
"""

PERCENTILES = ("p50", "p90", "p95", "p99")
QUANTILES: dict[str, float] = {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99}
