from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView
from rest_framework.permissions import AllowAny

from apps.core import views as core_views
from apps.core.api.views import ApiDocsView
from apps.dashboards import views as dashboard_views
from apps.dashboards.views import metrics as metrics_views

urlpatterns = [
    path("", dashboard_views.home, name="home"),
    path("healthz", core_views.healthz, name="healthz"),
    path("readyz", core_views.readyz, name="readyz"),
    path("accounts/", include("apps.teams.account_urls")),
    path("teams/", include("apps.teams.urls")),
    path("teams/<slug:team_slug>/pipelines/", include("apps.pipelines.urls")),
    path("teams/<slug:team_slug>/config/", include("apps.pipelines.config_urls")),
    path("teams/<slug:team_slug>/traces/", include("apps.dashboards.trace_urls")),
    path("teams/<slug:team_slug>/dashboards/", include("apps.dashboards.dashboard_urls")),
    path("teams/<slug:team_slug>/violations/", include("apps.dashboards.violation_urls")),
    path("teams/<slug:team_slug>/alerts/", include("apps.alerts.urls")),
    path("alerts/recipients/", include("apps.alerts.recipient_urls")),
    path("", include("apps.ingest.urls")),
    path("", include("apps.runtime.urls")),
    # At the path Prometheus scrapes by default; the bearer token names the team.
    path("metrics", metrics_views.metrics, name="metrics"),
    path("api/v1/", include("apps.pipelines.api_urls")),
    path("api/v1/", include("apps.analysis.api_urls")),
    path("api/v1/", include("apps.teams.api_urls")),
    path("api/v1/", include("apps.rollups.api_urls")),
    path("api/v1/", include("apps.dashboards.api_urls")),
    path("api/v1/", include("apps.alerts.api_urls")),
    path("api/v1/", include("apps.whatif.api_urls")),
    path(
        "api/schema/",
        SpectacularAPIView.as_view(permission_classes=[AllowAny]),
        name="api-schema",
    ),
    path(
        "api/docs/",
        ApiDocsView.as_view(url_name="api-schema", permission_classes=[AllowAny]),
        name="api-docs",
    ),
    path("admin/", admin.site.urls),
]

# Unknown API paths answer in the API's JSON error shape, the rest with the 404 page.
handler404 = "apps.core.views.not_found"
