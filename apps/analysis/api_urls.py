from django.urls import path

from apps.analysis.apis import recompute
from apps.core.api.routing import operations

PIPELINE = "pipelines/<slug:pipeline_slug>/"

urlpatterns = [
    path(
        PIPELINE + "recompute/",
        operations(recompute.RecomputeStateApi, recompute.RecomputeStartApi),
        name="api-recompute",
    ),
    path(
        PIPELINE + "recompute/<int:run_id>/",
        recompute.RecomputeRunApi.as_view(),
        name="api-recompute-run",
    ),
]
