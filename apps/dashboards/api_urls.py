from django.urls import path

from apps.dashboards.apis import traces, unmatched_spans

urlpatterns = [
    path("traces/", traces.TraceListApi.as_view(), name="api-traces"),
    # Before the trace URL; "unmatched" is not a trace id, which is 32 hex digits.
    path(
        "traces/unmatched/",
        traces.UnmatchedTrafficApi.as_view(),
        name="api-traces-unmatched",
    ),
    path("traces/<str:trace_hex>/", traces.TraceDetailApi.as_view(), name="api-trace"),
    path(
        "traces/<str:trace_hex>/spans/<str:span_hex>/",
        traces.TraceSpanApi.as_view(),
        name="api-trace-span",
    ),
    path(
        "pipelines/<slug:pipeline_slug>/unmatched-spans",
        unmatched_spans.PipelineUnmatchedSpansApi.as_view(),
        name="api-pipeline-unmatched-spans",
    ),
]
