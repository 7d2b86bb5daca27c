"""A stage's budgets on its streamed answers: the time per output token and the longest
gap between two chunks, each at one percentile (``docs/ingestion.md``, "Models and
streaming"). An answer whose longest gap passes ``max_chunk_gap``'s budget is a stream
stall; the budget at its percentile is evaluated and alerted on like the stage's own.

The one validator: the model, the API and the configuration file all call
``stream_budget_clean``.
"""

from typing import Any

from django.core.exceptions import ValidationError

TIME_PER_OUTPUT_TOKEN = "time_per_output_token"  # noqa: S105 - a key, not a secret
MAX_CHUNK_GAP = "max_chunk_gap"
KEYS = (TIME_PER_OUTPUT_TOKEN, MAX_CHUNK_GAP)
LABELS = {TIME_PER_OUTPUT_TOKEN: "time per output token", MAX_CHUNK_GAP: "longest chunk gap"}
MAX_MS = 3_600_000  # as a stage's own budget
PERCENTILES = ("p50", "p90", "p95", "p99")  # as Percentile


def stream_budget_clean(value: Any) -> dict[str, dict[str, int]]:
    """The budgets in stored form (keys in ``KEYS`` order): ``{key: {percentile: ms}}``;
    raises ``ValidationError`` naming the key that is wrong."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValidationError(
            "A stream budget is a mapping like {time_per_output_token: {p95: 40}}."
        )
    unknown = [str(key)[:40] for key in value if key not in KEYS]
    if unknown:
        raise ValidationError(f"Unknown key {', '.join(sorted(unknown))}: use {', '.join(KEYS)}.")
    clean: dict[str, dict[str, int]] = {}
    for key in KEYS:
        if key not in value:
            continue
        budget = value[key]
        if not isinstance(budget, dict) or len(budget) != 1:
            raise ValidationError(f"{key}: one percentile and its milliseconds, e.g. {{p95: 40}}.")
        ((percentile, ms),) = budget.items()
        if percentile not in PERCENTILES:
            raise ValidationError(f"{key}: a percentile of {', '.join(PERCENTILES)}.")
        if isinstance(ms, bool) or not isinstance(ms, int) or not 1 <= ms <= MAX_MS:
            raise ValidationError(f"{key}: whole milliseconds from 1 to {MAX_MS}.")
        clean[key] = {percentile: ms}
    return clean


def stream_budget_validator(value: Any) -> None:
    stream_budget_clean(value)


def stream_budget_text(budget: dict[str, dict[str, int]]) -> str:
    """One line for a plan or a page: ``time per output token p95 40 ms``."""
    if not budget:
        return "(none)"
    return "; ".join(
        f"{LABELS[key]} {percentile} {ms} ms"
        for key, values in budget.items()
        for percentile, ms in values.items()
    )
