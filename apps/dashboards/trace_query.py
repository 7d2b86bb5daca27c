"""The trace list's query string, read once for the page and the API alike.

Every filter and the order live in the query string, so a list is a URL to share:

- ``pipeline``: a pipeline's slug, or ``unmatched``; ``status``: ``ok``, ``error`` or
  ``incomplete``;
- ``min_duration_ms`` / ``max_duration_ms``: inclusive bounds on the end-to-end time;
- ``stage`` (of the chosen pipeline) with ``stage_over_budget`` (its wall time above its
  budget) and/or ``min_critical_share`` (a percentage of the trace on the critical path);
- ``degraded``: a run-time client recorded a decision on the trace (skip, fallback,
  hedge, cap, timeout), at the chosen ``stage`` when one is;
- ``attr=key=value``, repeatable, all must hold: some span of the trace (the root or any
  other) carried the pair (see ``apps.analysis.trace_search``);
- ``window``: a named range back from now (``15m`` … ``30d``), or ``from``/``to`` (UTC,
  ``YYYY-MM-DDTHH:MM[:SS]`` or RFC 3339; ``to`` defaults to now) on the root's start;
  none lists every kept trace;
- ``sort``: ``newest`` (default), ``oldest``, ``slowest`` or ``fastest``; ``cursor``:
  the next page of that order.

``trace_query_clean`` is the one validator: it raises ``ValidationError`` keyed by
parameter, which the page shows inline and the API answers as a 400.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from django.core.exceptions import ValidationError
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from apps.core.time import datetime_to_ns
from apps.ingest.models import ATTRIBUTE_KEY_MAX_CHARS, ATTRIBUTE_VALUE_MAX_CHARS
from apps.ingest.selectors import (
    UNMATCHED,
    TraceCursor,
    TraceFilters,
    TraceSort,
    TraceStatus,
)
from apps.pipelines.models import Pipeline, Stage
from apps.rollups.selectors import WINDOWS

CUSTOM = "custom"
# A day: longer traces exist (batch jobs), but not as the thing one filters by the ms.
MAX_DURATION_MS = 86_400_000
MAX_ATTRIBUTE_FILTERS = 5
# What one parameter may weigh before it is read: past it the request is refused
# without parsing (an attribute filter is a key, "=" and a value).
MAX_PARAM_CHARS = ATTRIBUTE_KEY_MAX_CHARS + ATTRIBUTE_VALUE_MAX_CHARS + 1
TRUE, FALSE = ("on", "true", "1", "yes"), ("", "off", "false", "0", "no")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
LAST_MOMENT = datetime(2262, 1, 1, tzinfo=UTC)
DATETIME_HINT = (
    f"Write a time as YYYY-MM-DDTHH:MM (UTC) or in RFC 3339, between {EPOCH:%Y} and "
    f"{LAST_MOMENT:%Y}."
)


class QueryParams(Protocol):
    """A query string's parameters: Django's QueryDict, DRF's ``query_params``."""

    def get(self, key: str, default: Any = None) -> Any: ...

    def getlist(self, key: str, default: Any = None) -> list[Any]: ...


@dataclass(frozen=True)
class TraceQuery:
    filters: TraceFilters = field(default_factory=TraceFilters)
    sort: str = TraceSort.NEWEST
    cursor: TraceCursor | None = None
    stage: Stage | None = None
    stage_over_budget: bool = False
    min_critical_percent: int | None = None
    degraded: bool = False
    attributes: tuple[tuple[str, str], ...] = ()
    window: str = ""  # "", a key of WINDOWS, or CUSTOM

    @property
    def range_label(self) -> str:
        if not self.window:
            return "any time"
        if self.window == CUSTOM:
            return "custom range"
        return WINDOWS[self.window].last


class _Errors:
    def __init__(self) -> None:
        self.by_field: dict[str, list[str]] = {}

    def add(self, name: str, message: str) -> None:
        self.by_field.setdefault(name, []).append(message)


def _text(params: QueryParams, name: str, errors: _Errors) -> str:
    values = params.getlist(name)
    value = values[-1] if values else ""
    if not isinstance(value, str):
        value = str(value)
    if len(value) > MAX_PARAM_CHARS:
        errors.add(name, f"At most {MAX_PARAM_CHARS} characters.")
        return ""
    return value.strip()


def _whole_number(text: str, name: str, errors: _Errors, low: int, high: int) -> int | None:
    if not text:
        return None
    try:
        number = int(text)
    except ValueError:
        errors.add(name, "Enter a whole number.")
        return None
    if not low <= number <= high:
        errors.add(name, f"Enter a whole number from {low} to {high}.")
        return None
    return number


def parse_moment(text: str) -> datetime | None:
    """An aware UTC datetime from ``YYYY-MM-DDTHH:MM[:SS]`` (UTC) or RFC 3339; None for
    anything else, and for times a span cannot have (64-bit nanoseconds since 1970)."""
    try:
        moment = parse_datetime(text)
        if moment is not None:
            moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    except (ValueError, OverflowError):
        return None
    if moment is None or not EPOCH <= moment < LAST_MOMENT:
        return None
    return moment


def _moment(text: str, name: str, errors: _Errors) -> datetime | None:
    if not text:
        return None
    moment = parse_moment(text)
    if moment is None:
        errors.add(name, DATETIME_HINT)
    return moment


def _attributes(params: QueryParams, errors: _Errors) -> tuple[tuple[str, str], ...]:
    raw = [v for v in params.getlist("attr") if isinstance(v, str) and v.strip()]
    if len(raw) > MAX_ATTRIBUTE_FILTERS:
        errors.add("attr", f"At most {MAX_ATTRIBUTE_FILTERS} attribute filters.")
        return ()
    pairs: list[tuple[str, str]] = []
    for item in raw:
        if len(item) > MAX_PARAM_CHARS:
            errors.add("attr", f"An attribute filter is at most {MAX_PARAM_CHARS} characters.")
            continue
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key:
            errors.add("attr", f"“{item[:40]}”: write an attribute filter as key=value.")
        elif any(ord(char) < 32 for char in key):
            errors.add("attr", "Attribute keys hold no control characters.")
        elif len(key) > ATTRIBUTE_KEY_MAX_CHARS:
            errors.add("attr", f"Attribute keys are at most {ATTRIBUTE_KEY_MAX_CHARS} characters.")
        elif len(value) > ATTRIBUTE_VALUE_MAX_CHARS:
            errors.add(
                "attr",
                f"“{key}”: values longer than {ATTRIBUTE_VALUE_MAX_CHARS} characters are not "
                "kept for filtering, so none can match.",
            )
        else:
            pairs.append((key, value))
    return tuple(dict.fromkeys(pairs))


def _time_range(
    params: QueryParams, errors: _Errors, now: datetime
) -> tuple[str, int | None, int | None]:
    """The window's name and ``[start, end)`` of the root's start, in nanoseconds."""
    window = _text(params, "window", errors)
    start_text, end_text = _text(params, "from", errors), _text(params, "to", errors)
    if window and window != CUSTOM and window not in WINDOWS:
        errors.add("window", f"Use one of {', '.join(WINDOWS)}, or {CUSTOM} with from/to.")
        return "", None, None
    if window in WINDOWS:
        if start_text or end_text:
            errors.add("window", "Give either a named range or from/to, not both.")
            return "", None, None
        return window, datetime_to_ns(now - WINDOWS[window].delta), None
    if not start_text and not end_text:
        if window == CUSTOM:
            errors.add("from", "Give the start of a custom range.")
        return "", None, None
    first, last = _moment(start_text, "from", errors), _moment(end_text, "to", errors)
    if (start_text and first is None) or (end_text and last is None):
        return "", None, None
    if first is None:
        errors.add("from", "Give from along with to.")
        return "", None, None
    if last is not None and last <= first:
        errors.add("to", "The end must come after the start.")
        return "", None, None
    return CUSTOM, datetime_to_ns(first), None if last is None else datetime_to_ns(last)


def _choice(text: str, name: str, choices: Sequence[str], errors: _Errors) -> str:
    if text and text not in choices:
        errors.add(name, f"Use one of {', '.join(choices)}.")
        return ""
    return text


def trace_query_clean(
    *, params: QueryParams, pipelines: Sequence[Pipeline], now: datetime | None = None
) -> TraceQuery:
    """The query the parameters ask for, among the team's ``pipelines`` (their stages
    loaded); ``ValidationError`` keyed by parameter when any is wrong."""
    errors = _Errors()
    now = now or timezone.now()
    by_slug = {pipeline.slug: pipeline for pipeline in pipelines}

    slug = _text(params, "pipeline", errors)
    pipeline = by_slug.get(slug)
    if slug and slug != UNMATCHED and pipeline is None:
        errors.add("pipeline", f"This team has no pipeline “{slug[:50]}”.")
    status = _choice(_text(params, "status", errors), "status", TraceStatus.values, errors)
    sort = _choice(_text(params, "sort", errors), "sort", TraceSort.values, errors)
    sort = sort or TraceSort.NEWEST

    low = _whole_number(
        _text(params, "min_duration_ms", errors), "min_duration_ms", errors, 0, MAX_DURATION_MS
    )
    high = _whole_number(
        _text(params, "max_duration_ms", errors), "max_duration_ms", errors, 0, MAX_DURATION_MS
    )
    if low is not None and high is not None and high < low:
        errors.add("max_duration_ms", "The longest duration must not be under the shortest.")

    stage, over_budget, share = _stage_filter(params, errors, pipeline, slug)
    degraded = _flag(params, "degraded", errors)
    attributes = _attributes(params, errors)
    window, start_ns, end_ns = _time_range(params, errors, now)

    cursor = None
    cursor_text = str(params.get("cursor") or "").strip()
    if cursor_text:
        try:
            cursor = TraceCursor.decode(cursor_text)  # refuses anything long at once
        except ValueError:
            errors.add("cursor", "This page link is damaged; start from the first page.")
        else:
            if cursor.sort != sort:
                errors.add("cursor", "This page link is of another order; start from the first.")
                cursor = None

    if errors.by_field:
        raise ValidationError(errors.by_field)
    return TraceQuery(
        filters=TraceFilters(
            pipeline=pipeline if slug != UNMATCHED else None,
            unmatched=slug == UNMATCHED,
            status=status,
            min_duration_ms=low,
            max_duration_ms=high,
            start_ns=start_ns,
            end_ns=end_ns,
        ),
        sort=sort,
        cursor=cursor,
        stage=stage,
        stage_over_budget=over_budget,
        min_critical_percent=share,
        degraded=degraded,
        attributes=attributes,
        window=window,
    )


def _flag(params: QueryParams, name: str, errors: _Errors) -> bool:
    flag = _text(params, name, errors).lower()
    if flag not in TRUE + FALSE:
        errors.add(name, "Use true or false.")
    return flag in TRUE


def _stage_filter(
    params: QueryParams, errors: _Errors, pipeline: Pipeline | None, slug: str
) -> tuple[Stage | None, bool, int | None]:
    stage_slug = _text(params, "stage", errors)
    over_budget = _flag(params, "stage_over_budget", errors)
    share_percent = _whole_number(
        _text(params, "min_critical_share", errors), "min_critical_share", errors, 1, 100
    )
    if not stage_slug:
        if over_budget or share_percent is not None:
            errors.add("stage", "Pick the stage to filter on.")
        return None, False, None
    if not slug or slug == UNMATCHED:
        errors.add("stage", "Pick the pipeline of the stage first.")
        return None, False, None
    if pipeline is None:
        return None, False, None  # the pipeline's own error says why
    stage = next((s for s in pipeline.stages.all() if s.slug == stage_slug), None)
    if stage is None:
        errors.add("stage", f"{pipeline.name} has no stage “{stage_slug[:50]}”.")
        return None, False, None
    if over_budget and stage.budget_ms is None:
        errors.add("stage_over_budget", f"{stage.name} has no budget to be over.")
    return stage, over_budget, share_percent
