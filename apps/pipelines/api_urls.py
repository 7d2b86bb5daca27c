from django.urls import path

from apps.core.api.routing import operations
from apps.pipelines import apis

PIPELINE = "pipelines/<slug:pipeline_slug>/"
STAGE = PIPELINE + "stages/<slug:stage_slug>/"

urlpatterns = [
    path(
        "pipelines/",
        operations(apis.PipelineListApi, apis.PipelineCreateApi),
        name="api-pipelines",
    ),
    path(
        PIPELINE,
        operations(apis.PipelineDetailApi, apis.PipelineUpdateApi, apis.PipelineDeleteApi),
        name="api-pipeline",
    ),
    path(
        PIPELINE + "stages/",
        operations(apis.StageListApi, apis.StageCreateApi),
        name="api-stages",
    ),
    # Before the stage URL, which would otherwise take "reorder" for a stage slug.
    path(PIPELINE + "stages/reorder/", apis.StageReorderApi.as_view(), name="api-stages-reorder"),
    path(
        STAGE,
        operations(apis.StageDetailApi, apis.StageUpdateApi, apis.StageDeleteApi),
        name="api-stage",
    ),
    path(
        STAGE + "rules/",
        operations(apis.SpanRuleListApi, apis.SpanRuleCreateApi),
        name="api-rules",
    ),
    path(
        STAGE + "rules/<int:rule_id>/",
        operations(apis.SpanRuleDetailApi, apis.SpanRuleUpdateApi, apis.SpanRuleDeleteApi),
        name="api-rule",
    ),
    path(
        PIPELINE + "no-stage-rules/",
        operations(apis.NoStageRuleListApi, apis.NoStageRuleCreateApi),
        name="api-no-stage-rules",
    ),
    path(
        PIPELINE + "no-stage-rules/<int:rule_id>/",
        operations(apis.NoStageRuleDetailApi, apis.NoStageRuleUpdateApi, apis.NoStageRuleDeleteApi),
        name="api-no-stage-rule",
    ),
]
