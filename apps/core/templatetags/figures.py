"""Template filters for figures: durations as ms or s, fractions as percent, stage colours."""

from datetime import UTC, datetime
from typing import Any

from django import template
from django.utils import timezone

from apps.core.figures import format_ms, format_percent, format_seconds, format_size, stage_colour
from apps.core.time import ns_to_datetime

register = template.Library()


@register.filter
def ms(value: float | None) -> str:
    """``{{ 1250|ms }}`` is "1.25 s"; ``{{ None|ms }}`` is "—" (see ``format_ms``)."""
    return format_ms(None if value is None else float(value))


@register.filter
def seconds(value: float | None) -> str:
    """``{{ 300|seconds }}`` is "5 min": a duration given in seconds, written as ``ms``."""
    return format_seconds(None if value is None else float(value))


@register.filter
def lasted(start: datetime | None, end: datetime | None) -> str:
    """``{{ v.opened_at|lasted:v.closed_at }}`` is "3 min 12 s": how long from ``start`` to
    ``end``, to the second, written as every other duration."""
    if start is None or end is None:
        return "—"
    seconds = max(0, round((end - start).total_seconds()))
    return format_seconds(seconds) if seconds else "0 s"


@register.filter
def size(value: int) -> str:
    """``{{ 2621440|size }}`` is "2.5 MiB"."""
    return format_size(int(value))


@register.filter
def percent(fraction: float | None, digits: int = 0) -> str:
    """``{{ 0.4234|percent:1 }}`` is "42.3 %"."""
    return format_percent(None if fraction is None else float(fraction), int(digits))


@register.filter
def stage_class(index: int | None) -> str:
    """The colour class of a pipeline's ``index``-th stage, as on every page."""
    return "untracked" if index is None else stage_colour(int(index))


@register.filter
def get_item(mapping: dict[str, str], key: str) -> str:
    return mapping.get(key, key)


@register.filter
def ns_datetime(ns: int | None) -> datetime | None:
    """Unix nanoseconds as an aware UTC datetime, for the ``date`` filter."""
    return None if ns is None else ns_to_datetime(int(ns))


@register.filter
def utc_moment(moment: datetime | None, precision: str = "") -> str:
    """A moment of today as "14:02 UTC", of another day as "2026-12-04 14:02 UTC";
    ``utc_moment:"seconds"`` adds the seconds ("14:02:37 UTC")."""
    if moment is None:
        return "—"
    moment = moment.astimezone(UTC)
    time = f"{moment:%H:%M:%S}" if precision == "seconds" else f"{moment:%H:%M}"
    if moment.date() == timezone.now().astimezone(UTC).date():
        return f"{time} UTC"
    return f"{moment:%Y-%m-%d} {time} UTC"


@register.filter
def mark_row(index: int) -> int:
    """The y of a chart mark's label: one 14-unit row per mark, above the plot."""
    return 4 + 14 * int(index)


@register.filter
def describe_change(change: Any, names: dict[str, str]) -> str:
    """A what-if change in words, with the stages' names ("Rerank removed")."""
    return str(change.describe(names))
