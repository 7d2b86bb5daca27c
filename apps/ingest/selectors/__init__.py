"""Reads for the trace explorer: trace pages, one trace's analysis, unmatched traffic."""

from apps.ingest.selectors.analysis import (
    MAX_WATERFALL_SPANS,
    SpanPart,
    StageBreakdown,
    TraceAnalysis,
    WaterfallRow,
    trace_analysis,
)
from apps.ingest.selectors.traces import (
    UNMATCHED,
    TraceCursor,
    TraceFilters,
    TracePage,
    TraceStatus,
    TraceSummary,
    ns_to_datetime,
    ns_to_ms,
    pipeline_for_filter,
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
)

__all__ = [
    "DEFAULT_WINDOW",
    "MAX_WATERFALL_SPANS",
    "UNMATCHED",
    "WINDOWS",
    "SpanPart",
    "StageBreakdown",
    "TraceAnalysis",
    "TraceCursor",
    "TraceFilters",
    "TracePage",
    "TraceStatus",
    "TraceSummary",
    "UnmatchedGroup",
    "UnmatchedSummary",
    "WaterfallRow",
    "ns_to_datetime",
    "ns_to_ms",
    "pipeline_for_filter",
    "root_span_glob",
    "trace_analysis",
    "traces_for_team",
    "traces_page",
    "unmatched_traffic",
]
