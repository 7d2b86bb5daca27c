"""Creating a team, and choosing the one to work in."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from apps.core.forms import add_service_error
from apps.core.htmx import HtmxHttpRequest
from apps.teams.access import membership_for_user
from apps.teams.current_team import current_team_remember
from apps.teams.forms import TeamCreateForm
from apps.teams.services import membership_default_set, team_create


@login_required
@require_http_methods(["GET", "POST"])
def team_create_view(request: HtmxHttpRequest) -> HttpResponse:
    form = TeamCreateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            team = team_create(
                slug=form.cleaned_data["slug"], name=form.cleaned_data["name"], owner=request.user
            )
        except ValidationError as exc:
            add_service_error(form, exc)
        else:
            current_team_remember(request, team)
            messages.success(request, f"Team “{team.name}” created. You are its owner.")
            return redirect("pipelines:list", team_slug=team.slug)
    return render(request, "teams/create.html", {"form": form})


@login_required
@require_POST  # it changes the user's default team: never on a GET a page could embed
def switch(request: HtmxHttpRequest, team_slug: str) -> HttpResponse:
    membership = membership_for_user(user=request.user, team_slug=team_slug)
    membership_default_set(membership=membership)
    current_team_remember(request, membership.team)
    return redirect("dashboards:team_home", team_slug=membership.team.slug)
