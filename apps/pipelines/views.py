# Placeholder views, replaced by the pipelines UI.
from django.http import HttpRequest, HttpResponse


def pipeline_list(request: HttpRequest, team_slug: str) -> HttpResponse:
    return HttpResponse("pipelines")
