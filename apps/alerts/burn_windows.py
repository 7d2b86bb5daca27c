"""Multi-window burn-rate conditions: the SRE workbook's defaults and their validation."""

from collections.abc import Sequence
from typing import Any, TypedDict

from django.core.exceptions import ValidationError

from apps.alerts.models import Severity


class BurnWindow(TypedDict):
    long_s: int
    short_s: int
    factor: float
    severity: str


# The Site Reliability Workbook, "Alerting on SLOs": 2 % of a 30-day budget in an hour
# and 5 % in six hours page; 10 % in three days opens a ticket. Each long window comes
# with a short one of a twelfth, so that the alert resolves soon after the burn stops.
DEFAULT_BURN_WINDOWS: tuple[BurnWindow, ...] = (
    {"long_s": 3600, "short_s": 300, "factor": 14.4, "severity": Severity.CRITICAL.value},
    {"long_s": 21600, "short_s": 1800, "factor": 6.0, "severity": Severity.CRITICAL.value},
    {"long_s": 259200, "short_s": 21600, "factor": 1.0, "severity": Severity.WARNING.value},
)
MAX_WINDOW_S = 30 * 86400
MAX_PAIRS = 6


def burn_windows_for(configured: Sequence[BurnWindow]) -> list[BurnWindow]:
    return list(configured) if configured else list(DEFAULT_BURN_WINDOWS)


def burn_windows_clean(value: Any) -> list[BurnWindow]:
    """The pairs as stored, or ValidationError saying what is wrong with which pair."""
    if value in (None, "", "default"):
        return []
    if not isinstance(value, list) or len(value) > MAX_PAIRS:
        raise ValidationError(f"Burn windows are a list of at most {MAX_PAIRS} pairs.")
    pairs: list[BurnWindow] = []
    for index, pair in enumerate(value, start=1):
        if not isinstance(pair, dict) or set(pair) != {"long_s", "short_s", "factor", "severity"}:
            raise ValidationError(
                f"Burn window {index} needs long_s, short_s, factor and severity, nothing else."
            )
        long_s, short_s, factor = pair["long_s"], pair["short_s"], pair["factor"]
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (long_s, short_s)):
            raise ValidationError(f"Burn window {index}: long_s and short_s are whole seconds.")
        if not 60 <= short_s < long_s <= MAX_WINDOW_S:
            raise ValidationError(
                f"Burn window {index}: the short window must be at least 60 s and shorter than "
                f"the long one, itself at most {MAX_WINDOW_S // 86400} days."
            )
        if (
            isinstance(factor, bool)
            or not isinstance(factor, int | float)
            or not 0 < factor <= 1000
        ):
            raise ValidationError(f"Burn window {index}: factor must be a number above 0.")
        if pair["severity"] not in Severity.values:
            raise ValidationError(
                f"Burn window {index}: severity must be one of {', '.join(Severity.values)}."
            )
        pairs.append(
            {
                "long_s": long_s,
                "short_s": short_s,
                "factor": float(factor),
                "severity": pair["severity"],
            }
        )
    return pairs
