"""REST API of the trace explorer; read-only, for personal API tokens and sessions."""

from apps.ingest.trace_apis.views import TraceDetailApi, TraceListApi, UnmatchedTrafficApi

__all__ = ["TraceDetailApi", "TraceListApi", "UnmatchedTrafficApi"]
