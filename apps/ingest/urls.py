from django.urls import path

from apps.ingest import views
from apps.ingest.apis.spans import SpanBatchApi

# Mounted at the site root: OTLP exporters default to the path /v1/traces.
urlpatterns = [
    path("v1/traces", views.otlp_traces, name="otlp-traces"),
    path("api/v1/spans", SpanBatchApi.as_view(), name="api-spans"),
]
