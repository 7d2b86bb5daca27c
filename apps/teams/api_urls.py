from django.urls import path

from apps.teams.apis import teams as apis

urlpatterns = [
    path("teams/", apis.TeamListApi.as_view(), name="api-teams"),
    path("me/", apis.MeApi.as_view(), name="api-me"),
]
