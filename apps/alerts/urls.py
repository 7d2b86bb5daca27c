from django.urls import path

from apps.alerts import views

app_name = "alerts"

CHANNEL = "channels/<slug:channel_slug>/"
RULE = "rules/<slug:rule_slug>/"

urlpatterns = [
    path("", views.incident_list, name="incidents"),
    # Notification links and e-mails name this one: (team_slug, incident_id).
    path("incidents/<int:incident_id>/", views.incident_detail, name="incident"),
    path("channels/", views.channel_list, name="channels"),
    path("channels/new/<slug:kind>/", views.channel_create_view, name="channel_create"),
    path(CHANNEL + "edit/", views.channel_edit, name="channel_edit"),
    path(CHANNEL + "delete/", views.channel_delete_view, name="channel_delete"),
    path(CHANNEL + "test/", views.channel_test, name="channel_test"),
    path(CHANNEL + "result/", views.channel_result, name="channel_result"),
    path(CHANNEL + "enable/", views.channel_enable_view, name="channel_enable"),
    path(CHANNEL + "rotate-secret/", views.channel_rotate, name="channel_rotate"),
    path(
        CHANNEL + "recipients/<int:recipient_id>/resend/",
        views.recipient_resend,
        name="recipient_resend",
    ),
    path("rules/", views.rule_list, name="rules"),
    path("rules/new/", views.rule_create_view, name="rule_create"),
    path(RULE + "edit/", views.rule_edit, name="rule_edit"),
    path(RULE + "delete/", views.rule_delete_view, name="rule_delete"),
    path(RULE + "silence/", views.rule_silence, name="rule_silence"),
    path(RULE + "unsilence/", views.rule_unsilence, name="rule_unsilence"),
]
