"""How figures read on every page: durations as ms or s, shares as percent, stage colours."""

# Stage colours: a palette safe for colour vision deficiency (Okabe and Ito), by the
# stage's order in its pipeline, the same on every page; labels carry the name too.
PALETTE_SIZE = 8
UNTRACKED_CLASS = "untracked"


def stage_colour(index: int) -> str:
    """The CSS class of the ``index``-th stage of a pipeline (0-based)."""
    return f"stage-{index % PALETTE_SIZE}"


def format_ms(value: float | None) -> str:
    """A duration for people: "0.42 ms", "12.3 ms", "850 ms", "1.25 s", "95 s"."""
    if value is None:
        return "—"
    if value == 0:
        return "0 ms"
    if value < 1:
        return f"{value:.2f} ms"
    if value < 100:
        return f"{value:.1f} ms"
    if value < 1000:
        return f"{value:.0f} ms"
    seconds = value / 1000
    if seconds < 10:
        return f"{seconds:.2f} s"
    if seconds < 100:
        return f"{seconds:.1f} s"
    return f"{seconds:.0f} s"


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
