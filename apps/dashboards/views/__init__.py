"""Pages composed from selectors: the home redirect and the trace explorer."""

from apps.dashboards.views.home import CURRENT_TEAM_SESSION_KEY, home
from apps.dashboards.views.traces import trace_detail, trace_list, unmatched_traffic_view

__all__ = [
    "CURRENT_TEAM_SESSION_KEY",
    "home",
    "trace_detail",
    "trace_list",
    "unmatched_traffic_view",
]
