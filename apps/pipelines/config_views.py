# Placeholder view, replaced by the configuration-as-code UI.
from django.http import HttpRequest, HttpResponse


def config_page(request: HttpRequest, team_slug: str) -> HttpResponse:
    return HttpResponse("config")
