"""Reads for the trace explorer: trace pages, one span's details and unmatched traffic."""

from apps.ingest.selectors.span_details import (
    MAX_SHOWN_VALUES,
    ShownEvent,
    ShownValue,
    SpanContent,
    span_content,
)
from apps.ingest.selectors.traces import (
    UNMATCHED,
    SearchNarrowing,
    TraceCursor,
    TraceFilters,
    TracePage,
    TraceSort,
    TraceStatus,
    TraceSummary,
    duration_expression,
    traces_for_team,
    traces_page,
)
from apps.ingest.selectors.unmatched import (
    DEFAULT_WINDOW,
    WINDOWS,
    UnmatchedGroup,
    UnmatchedSummary,
    root_span_glob,
    unmatched_traffic,
    unmatched_traffic_recent,
)

__all__ = [
    "DEFAULT_WINDOW",
    "MAX_SHOWN_VALUES",
    "UNMATCHED",
    "WINDOWS",
    "SearchNarrowing",
    "ShownEvent",
    "ShownValue",
    "SpanContent",
    "TraceCursor",
    "TraceFilters",
    "TracePage",
    "TraceSort",
    "TraceStatus",
    "TraceSummary",
    "UnmatchedGroup",
    "UnmatchedSummary",
    "duration_expression",
    "root_span_glob",
    "span_content",
    "traces_for_team",
    "traces_page",
    "unmatched_traffic",
    "unmatched_traffic_recent",
]
