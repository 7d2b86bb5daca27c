"""REST API for a team's alert channels, alert rules and incidents.

One view per operation, each with its own serializers; writes go through the services,
reads through the selectors. The team comes from apps.teams.request_team.
"""

from apps.alerts.apis.channels import (
    ChannelConfirmationResendApi,
    ChannelCreateApi,
    ChannelDeleteApi,
    ChannelDetailApi,
    ChannelListApi,
    ChannelTestApi,
    ChannelUpdateApi,
)
from apps.alerts.apis.incidents import IncidentDetailApi, IncidentListApi
from apps.alerts.apis.rules import (
    AlertRuleCreateApi,
    AlertRuleDeleteApi,
    AlertRuleDetailApi,
    AlertRuleListApi,
    AlertRuleSilenceApi,
    AlertRuleUnsilenceApi,
    AlertRuleUpdateApi,
)

__all__ = [
    "AlertRuleCreateApi",
    "AlertRuleDeleteApi",
    "AlertRuleDetailApi",
    "AlertRuleListApi",
    "AlertRuleSilenceApi",
    "AlertRuleUnsilenceApi",
    "AlertRuleUpdateApi",
    "ChannelConfirmationResendApi",
    "ChannelCreateApi",
    "ChannelDeleteApi",
    "ChannelDetailApi",
    "ChannelListApi",
    "ChannelTestApi",
    "ChannelUpdateApi",
    "IncidentDetailApi",
    "IncidentListApi",
]
