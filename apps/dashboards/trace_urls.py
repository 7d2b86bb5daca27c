from django.urls import path

from apps.dashboards import views

app_name = "traces"

urlpatterns = [
    path("", views.trace_list, name="list"),
    # Before the trace URL; "unmatched" is not a trace id, which is 32 hex digits.
    path("unmatched/", views.unmatched_traffic_view, name="unmatched"),
    path("<str:trace_hex>/", views.trace_detail, name="detail"),
]
