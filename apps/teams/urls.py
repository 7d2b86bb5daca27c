from django.urls import path

from apps.teams import views

app_name = "teams"

urlpatterns = [
    path("new/", views.team_create_view, name="create"),
    path("tokens/", views.api_tokens, name="api_tokens"),
    path("<slug:team_slug>/", views.switch, name="switch"),
    path("<slug:team_slug>/members/", views.members, name="members"),
]
