from django.urls import path

from apps.teams import apis

urlpatterns = [
    path("teams/", apis.TeamListApi.as_view(), name="api-teams"),
    path("me/", apis.MeApi.as_view(), name="api-me"),
]
