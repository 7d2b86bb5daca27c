# Placeholder views, replaced by the teams UI.
from django.http import HttpRequest, HttpResponse


def signup(request: HttpRequest) -> HttpResponse:
    return HttpResponse("signup")


def team_create_view(request: HttpRequest) -> HttpResponse:
    return HttpResponse("create")


def api_tokens(request: HttpRequest) -> HttpResponse:
    return HttpResponse("tokens")


def switch(request: HttpRequest, team_slug: str) -> HttpResponse:
    return HttpResponse("switch")


def members(request: HttpRequest, team_slug: str) -> HttpResponse:
    return HttpResponse("members")
