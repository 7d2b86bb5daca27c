from django.urls import path

from apps.teams import views

app_name = "teams"

urlpatterns = [
    path("new/", views.team_create_view, name="create"),
    path("tokens/", views.api_tokens, name="api_tokens"),
    path("tokens/<int:token_id>/revoke/", views.api_token_revoke_view, name="api_token_revoke"),
    path("<slug:team_slug>/", views.switch, name="switch"),
    path("<slug:team_slug>/members/", views.members, name="members"),
    path("<slug:team_slug>/members/leave/", views.leave, name="leave"),
    path(
        "<slug:team_slug>/members/<int:membership_id>/role/",
        views.member_role,
        name="member_role",
    ),
    path(
        "<slug:team_slug>/members/<int:membership_id>/remove/",
        views.member_remove,
        name="member_remove",
    ),
    path("<slug:team_slug>/ingest-tokens/", views.ingest_tokens, name="ingest_tokens"),
    path(
        "<slug:team_slug>/ingest-tokens/<int:token_id>/revoke/",
        views.ingest_token_revoke_view,
        name="ingest_token_revoke",
    ),
]
