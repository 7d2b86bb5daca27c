from django.urls import path

from apps.alerts import apis
from apps.core.api.routing import operations

CHANNEL = "channels/<slug:channel_slug>/"
RULE = "alert-rules/<slug:rule_slug>/"

urlpatterns = [
    path("channels/", operations(apis.ChannelListApi, apis.ChannelCreateApi), name="api-channels"),
    path(
        CHANNEL,
        operations(apis.ChannelDetailApi, apis.ChannelUpdateApi, apis.ChannelDeleteApi),
        name="api-channel",
    ),
    path(CHANNEL + "test", apis.ChannelTestApi.as_view(), name="api-channel-test"),
    path(
        CHANNEL + "resend-confirmation",
        apis.ChannelConfirmationResendApi.as_view(),
        name="api-channel-resend-confirmation",
    ),
    path(
        "alert-rules/",
        operations(apis.AlertRuleListApi, apis.AlertRuleCreateApi),
        name="api-alert-rules",
    ),
    path(
        RULE,
        operations(apis.AlertRuleDetailApi, apis.AlertRuleUpdateApi, apis.AlertRuleDeleteApi),
        name="api-alert-rule",
    ),
    path(
        RULE + "silence",
        operations(apis.AlertRuleSilenceApi, apis.AlertRuleUnsilenceApi),
        name="api-alert-rule-silence",
    ),
    path("incidents/", apis.IncidentListApi.as_view(), name="api-incidents"),
    path("incidents/<int:incident_id>/", apis.IncidentDetailApi.as_view(), name="api-incident"),
]
