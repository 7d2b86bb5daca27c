from django.urls import path

from apps.rollups import apis
from apps.rollups.apis import degradations as degradation_apis
from apps.rollups.apis import fit as fit_apis
from apps.rollups.apis import models_api
from apps.rollups.apis import objectives as objective_apis
from apps.rollups.apis import violations as violation_apis

PIPELINE = "pipelines/<slug:pipeline_slug>/"

urlpatterns = [
    path(
        PIPELINE + "percentiles",
        apis.PipelinePercentilesApi.as_view(),
        name="api-pipeline-percentiles",
    ),
    path(PIPELINE + "series", apis.PipelineSeriesApi.as_view(), name="api-pipeline-series"),
    path(
        PIPELINE + "stages/<slug:stage_slug>/models",
        models_api.StageModelsApi.as_view(),
        name="api-stage-models",
    ),
]

urlpatterns += [
    path("violations/", violation_apis.ViolationListApi.as_view(), name="api-violations"),
    path(
        "violations/<int:violation_id>/",
        violation_apis.ViolationDetailApi.as_view(),
        name="api-violation",
    ),
    path(
        PIPELINE + "objective",
        objective_apis.PipelineObjectiveApi.as_view(),
        name="api-pipeline-objective",
    ),
    path(PIPELINE + "fit", fit_apis.PipelineFitApi.as_view(), name="api-pipeline-fit"),
    path(
        PIPELINE + "degradations",
        degradation_apis.PipelineDegradationsApi.as_view(),
        name="api-pipeline-degradations",
    ),
]
