from django.urls import path

from apps.teams.views import members, metrics_tokens, teams, tokens

app_name = "teams"

urlpatterns = [
    path("new/", teams.team_create_view, name="create"),
    path("tokens/", tokens.api_tokens, name="api_tokens"),
    path("tokens/<int:token_id>/revoke/", tokens.api_token_revoke_view, name="api_token_revoke"),
    path("<slug:team_slug>/", teams.switch, name="switch"),
    path("<slug:team_slug>/members/", members.members, name="members"),
    path("<slug:team_slug>/members/leave/", members.leave, name="leave"),
    path(
        "<slug:team_slug>/members/<int:membership_id>/role/",
        members.member_role,
        name="member_role",
    ),
    path(
        "<slug:team_slug>/members/<int:membership_id>/remove/",
        members.member_remove,
        name="member_remove",
    ),
    path(
        "<slug:team_slug>/invitations/<int:invitation_id>/resend/",
        members.invitation_resend_view,
        name="invitation_resend",
    ),
    path(
        "<slug:team_slug>/invitations/<int:invitation_id>/revoke/",
        members.invitation_revoke_view,
        name="invitation_revoke",
    ),
    path("<slug:team_slug>/ingest-tokens/", tokens.ingest_tokens, name="ingest_tokens"),
    path(
        "<slug:team_slug>/ingest-tokens/<int:token_id>/revoke/",
        tokens.ingest_token_revoke_view,
        name="ingest_token_revoke",
    ),
    path("<slug:team_slug>/metrics/", metrics_tokens.metrics_tokens, name="metrics_tokens"),
    path(
        "<slug:team_slug>/metrics/<int:token_id>/revoke/",
        metrics_tokens.metrics_token_revoke_view,
        name="metrics_token_revoke",
    ),
]
