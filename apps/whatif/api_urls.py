from django.urls import path

from apps.whatif.apis import runs, scenarios

PIPELINE = "pipelines/<slug:pipeline_slug>/"

urlpatterns = [
    path(PIPELINE + "whatif", runs.PipelineWhatIfApi.as_view(), name="api-whatif"),
    path(PIPELINE + "whatif/<int:run_id>", runs.WhatIfRunApi.as_view(), name="api-whatif-run"),
    path(PIPELINE + "levers", runs.PipelineLeversApi.as_view(), name="api-levers"),
    path(PIPELINE + "levers/<int:run_id>", runs.LeversRunApi.as_view(), name="api-levers-run"),
    path(PIPELINE + "scenarios", scenarios.ScenarioListApi.as_view(), name="api-scenarios"),
    path(
        PIPELINE + "scenarios/<int:scenario_id>",
        scenarios.ScenarioDetailApi.as_view(),
        name="api-scenario",
    ),
]
