"""Pages composed from selectors: the home redirect and the trace explorer."""

from apps.dashboards.views.home import home
from apps.dashboards.views.traces import trace_detail, trace_list, unmatched_traffic_view

__all__ = [
    "home",
    "trace_detail",
    "trace_list",
    "unmatched_traffic_view",
]
