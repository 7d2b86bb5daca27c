from django.urls import path

from apps.ingest import trace_apis

urlpatterns = [
    path("traces/", trace_apis.TraceListApi.as_view(), name="api-traces"),
    # Before the trace URL; "unmatched" is not a trace id, which is 32 hex digits.
    path(
        "traces/unmatched/",
        trace_apis.UnmatchedTrafficApi.as_view(),
        name="api-traces-unmatched",
    ),
    path("traces/<str:trace_hex>/", trace_apis.TraceDetailApi.as_view(), name="api-trace"),
]
