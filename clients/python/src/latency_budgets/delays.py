"""A hedge's delay: a percentile of the stage's time without levers, or milliseconds."""

from latency_budgets.figures import StageFigures

PERCENTILE_NAMES = ("p50", "p95", "p99")


def hedge_delay_ms(figures: StageFigures | None, after: str | float) -> float | None:
    """None when the figure is unknown: then no hedge is sent."""
    if isinstance(after, int | float) and not isinstance(after, bool):
        if not after >= 0:  # also refuses NaN
            raise ValueError("A hedge delay cannot be negative.")
        return float(after)
    if after not in PERCENTILE_NAMES:
        raise ValueError(f"`after` is one of {', '.join(PERCENTILE_NAMES)} or milliseconds.")
    if figures is None:
        return None
    return figures.tail(after)
