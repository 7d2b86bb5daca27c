"""How figures read on every page: durations as ms or s, shares as percent, stage colours."""

import math
from decimal import ROUND_HALF_UP, Decimal

# Stage colours: a palette safe for colour vision deficiency (Okabe and Ito), by the
# stage's order in its pipeline, the same on every page; labels carry the name too.
PALETTE_SIZE = 8
UNTRACKED_CLASS = "untracked"
MINUS = "\N{MINUS SIGN}"  # as negative figures are written on the pages


def stage_colour(index: int) -> str:
    """The CSS class of the ``index``-th stage of a pipeline (0-based)."""
    return f"stage-{index % PALETTE_SIZE}"


def _rounded(value: float, places: int) -> Decimal:
    """``value`` to ``places`` decimals, halves away from zero as people round: through
    its shortest decimal form, so that 999.95 is 1000.0 and 0.25 is 0.3."""
    return Decimal(repr(value)).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)


def _plain(number: Decimal) -> str:
    """A rounded number without trailing zeros: 12.0 is "12", 1.50 is "1.5"."""
    text = f"{number:f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def format_ms(value: float | None) -> str:
    """A duration in milliseconds, as every page, chart, e-mail and alert writes it.

    Below a second, milliseconds with at most one decimal ("0.4 ms", "12 ms",
    "145.2 ms"); from a second, seconds with at most two decimals below 10 s ("1.62 s")
    and one below a minute ("59.9 s"); then minutes and whole seconds ("1 min 5 s"),
    hours and minutes ("1 h 30 min"), days and hours ("3 d", "2 d 6 h"). A figure is
    placed by its rounded value, so 999.95 ms reads "1 s", never "1000 ms". Under
    0.05 ms but not zero reads "< 0.1 ms"; a negative figure (a saving that is a loss)
    takes a minus sign.
    """
    if value is None or not math.isfinite(value):
        return "—"
    sign = MINUS if value < 0 else ""
    magnitude = abs(float(value))
    if magnitude == 0:
        return "0 ms"
    tenths = _rounded(magnitude, 1)
    if tenths == 0:
        return "< 0.1 ms"
    if tenths < 1000:
        return f"{sign}{_plain(tenths)} ms"
    seconds = magnitude / 1000
    hundredths = _rounded(seconds, 2)
    if hundredths < 10:
        return f"{sign}{_plain(hundredths)} s"
    tenths_s = _rounded(seconds, 1)
    if tenths_s < 60:
        return f"{sign}{_plain(tenths_s)} s"
    # Each unit from the figure rounded to it, so that 59 min 59.5 s reads "1 h".
    whole_seconds = int(_rounded(seconds, 0))
    if whole_seconds < 3600:
        minutes, rest = divmod(whole_seconds, 60)
        return f"{sign}{minutes} min" + (f" {rest} s" if rest else "")
    whole_minutes = int(_rounded(seconds / 60, 0))
    if whole_minutes < 24 * 60:
        hours, rest = divmod(whole_minutes, 60)
        return f"{sign}{hours} h" + (f" {rest} min" if rest else "")
    days, rest = divmod(int(_rounded(seconds / 3600, 0)), 24)
    return f"{sign}{days} d" + (f" {rest} h" if rest else "")


def format_seconds(value: float | None) -> str:
    """A duration given in seconds (a window, an interval), written as ``format_ms``."""
    return format_ms(None if value is None else float(value) * 1000)


def format_size(size: int) -> str:
    """Bytes for people: "812 bytes", "3.5 KiB", "16 MiB", "1.2 GiB"."""
    if size < 1024:
        return f"{size} byte{'' if size == 1 else 's'}"
    value, unit = size / 1024, "KiB"
    for larger in ("MiB", "GiB"):
        if value < 1024:
            break
        value, unit = value / 1024, larger
    return f"{value:.1f} {unit}" if value < 10 else f"{value:.0f} {unit}"


def format_percent(fraction: float | None, digits: int = 0) -> str:
    if fraction is None:
        return "—"
    return f"{fraction * 100:.{digits}f} %"
