"""REST API for a team's pipelines, their stages, span rules and no-stage rules.

One view per operation, each with its input serializer; writes go through the
services, reads through the selectors. The team comes from apps.teams.request_team.
"""

from apps.pipelines.apis.no_stage_rules import (
    NoStageRuleCreateApi,
    NoStageRuleDeleteApi,
    NoStageRuleDetailApi,
    NoStageRuleListApi,
    NoStageRuleUpdateApi,
)
from apps.pipelines.apis.pipelines import (
    PipelineCreateApi,
    PipelineDeleteApi,
    PipelineDetailApi,
    PipelineListApi,
    PipelineUpdateApi,
)
from apps.pipelines.apis.rules import (
    SpanRuleCreateApi,
    SpanRuleDeleteApi,
    SpanRuleDetailApi,
    SpanRuleListApi,
    SpanRuleUpdateApi,
)
from apps.pipelines.apis.stages import (
    StageCreateApi,
    StageDeleteApi,
    StageDetailApi,
    StageListApi,
    StageReorderApi,
    StageUpdateApi,
)

__all__ = [
    "NoStageRuleCreateApi",
    "NoStageRuleDeleteApi",
    "NoStageRuleDetailApi",
    "NoStageRuleListApi",
    "NoStageRuleUpdateApi",
    "PipelineCreateApi",
    "PipelineDeleteApi",
    "PipelineDetailApi",
    "PipelineListApi",
    "PipelineUpdateApi",
    "SpanRuleCreateApi",
    "SpanRuleDeleteApi",
    "SpanRuleDetailApi",
    "SpanRuleListApi",
    "SpanRuleUpdateApi",
    "StageCreateApi",
    "StageDeleteApi",
    "StageDetailApi",
    "StageListApi",
    "StageReorderApi",
    "StageUpdateApi",
]
