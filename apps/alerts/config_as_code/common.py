"""Small reads shared by the ``channels:`` and ``alerts:`` schemas."""

import math
from typing import Any

from apps.alerts.config_as_code.durations import EXAMPLE, duration_seconds
from apps.pipelines.config_as_code.loader import Item, Node, Scalar
from apps.pipelines.config_as_code.reader import Reader, describe
from apps.teams.models import slug_validator


def read_slug(reader: Reader, item: Item | None) -> str:
    if item is None:
        return ""
    return reader.text(item, max_length=50, check=slug_validator) or ""


def line_of(item: Item | None, node: Node) -> int:
    return item.value.line if item is not None else node.line


def check_unique(reader: Reader, slugs: list[tuple[str, int]], what: str, where: str = "") -> None:
    seen: dict[str, int] = {}
    for slug, line in slugs:
        if not slug:
            continue
        if slug in seen:
            reader.error(line, f"Duplicate {what} “{slug}”{where} (first at line {seen[slug]}).")
        else:
            seen[slug] = line


def is_whole(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value == int(value)
    )


def read_duration(reader: Reader, item: Item) -> int | None:
    """Whole seconds from text such as ``15m``; problems are reported at the value's line."""
    value = reader.scalar(item)
    seconds = duration_seconds(value) if isinstance(value, str) else None
    if seconds is None:
        if isinstance(item.value, Scalar):
            shown = f"“{value}”" if isinstance(value, str) else describe(item.value)
            reader.error(
                item.value.line,
                f"“{item.key}” must be a duration such as {EXAMPLE}, not {shown}.",
            )
        return None
    return seconds
