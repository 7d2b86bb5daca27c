"""Named windows back from now ("15m" … "30d"): how long each is and how it is written.

Pages, the API and the selectors each offer some of them (``named_windows``), so a key
means the same span of time, and reads the same, everywhere.
"""

from dataclasses import dataclass
from datetime import timedelta


@dataclass(frozen=True)
class NamedWindow:
    key: str
    seconds: int
    label: str  # "1 hour": a range button, and "last 1 hour" in a sentence

    @property
    def delta(self) -> timedelta:
        return timedelta(seconds=self.seconds)

    @property
    def last(self) -> str:
        return f"last {self.label}"


NAMED_WINDOWS: dict[str, NamedWindow] = {
    window.key: window
    for window in (
        NamedWindow("5m", 5 * 60, "5 min"),
        NamedWindow("15m", 15 * 60, "15 min"),
        NamedWindow("1h", 3600, "1 hour"),
        NamedWindow("6h", 6 * 3600, "6 hours"),
        NamedWindow("24h", 86400, "24 hours"),
        NamedWindow("7d", 7 * 86400, "7 days"),
        NamedWindow("30d", 30 * 86400, "30 days"),
    )
}


def named_windows(*keys: str) -> dict[str, NamedWindow]:
    """The windows one page or endpoint offers, in the order given."""
    return {key: NAMED_WINDOWS[key] for key in keys}
