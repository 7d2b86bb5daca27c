"""Reads of analysis: one trace taken apart for the explorer."""

from apps.analysis.selectors.breakdown import (
    MAX_WATERFALL_SPANS,
    SpanPart,
    StageBreakdown,
    TraceAnalysis,
    WaterfallRow,
    trace_analysis,
)

__all__ = [
    "MAX_WATERFALL_SPANS",
    "SpanPart",
    "StageBreakdown",
    "TraceAnalysis",
    "WaterfallRow",
    "trace_analysis",
]
