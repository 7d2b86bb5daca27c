"""Pages of the alerts: the history of incidents, the rules and the channels."""

from apps.alerts.views.channels import (
    channel_create_view,
    channel_delete_view,
    channel_edit,
    channel_enable_view,
    channel_list,
    channel_result,
    channel_rotate,
    channel_test,
)
from apps.alerts.views.incidents import incident_detail, incident_list
from apps.alerts.views.recipients import recipient_resend
from apps.alerts.views.rules import (
    rule_create_view,
    rule_delete_view,
    rule_edit,
    rule_list,
    rule_silence,
    rule_unsilence,
)

__all__ = [
    "channel_create_view",
    "channel_delete_view",
    "channel_edit",
    "channel_enable_view",
    "channel_list",
    "channel_result",
    "channel_rotate",
    "channel_test",
    "incident_detail",
    "incident_list",
    "recipient_resend",
    "rule_create_view",
    "rule_delete_view",
    "rule_edit",
    "rule_list",
    "rule_silence",
    "rule_unsilence",
]
