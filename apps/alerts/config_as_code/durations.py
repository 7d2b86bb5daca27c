"""Durations as people write them in the file (``90s``, ``5m``, ``1h30m``, ``3d``)."""

import re

_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_DURATION = re.compile(r"(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")
EXAMPLE = "5m, 1h, 6h or 3d"


def duration_seconds(text: str) -> int | None:
    """Whole seconds, or None when ``text`` is not a duration such as ``1h30m``."""
    match = _DURATION.fullmatch(text.strip())
    if match is None or not any(match.groups()):
        return None
    return sum(
        int(value or 0) * unit for value, unit in zip(match.groups(), _UNITS.values(), strict=True)
    )


def duration_text(seconds: int) -> str:
    """``seconds`` in the largest units that fit (``5400`` is ``1h30m``); read back as is."""
    if seconds == 0:
        return "0s"
    parts = []
    for suffix, unit in _UNITS.items():
        count, seconds = divmod(seconds, unit)
        if count:
            parts.append(f"{count}{suffix}")
    return "".join(parts)
