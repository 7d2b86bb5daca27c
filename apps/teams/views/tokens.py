"""Personal API tokens and a team's ingest tokens: shown once at creation, revocable."""

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from apps.core.forms import add_service_error
from apps.core.htmx import HtmxHttpRequest, render_page
from apps.teams.access import membership_for_user, membership_for_writer
from apps.teams.forms import ApiTokenCreateForm, IngestTokenCreateForm
from apps.teams.ingest_usage import ingest_usage_for_team
from apps.teams.models import Membership
from apps.teams.selectors import api_tokens_for_user, ingest_tokens_for_team
from apps.teams.services import (
    api_token_create,
    api_token_revoke,
    ingest_token_create,
    ingest_token_revoke,
)

API_TOKENS = "teams/api_tokens.html"
INGEST_TOKENS = "teams/ingest_tokens.html"


def _tokens_context(
    request: HtmxHttpRequest,
    *,
    form: ApiTokenCreateForm,
    new_token: str = "",
    new_token_name: str = "",
) -> dict[str, Any]:
    return {
        "form": form,
        "tokens": api_tokens_for_user(user=request.user),
        "new_token": new_token,
        "new_token_name": new_token_name,
    }


@never_cache  # the page may carry a freshly created token
@login_required
@require_http_methods(["GET", "POST"])
def api_tokens(request: HtmxHttpRequest) -> HttpResponse:
    form = ApiTokenCreateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            token, raw = api_token_create(
                user=request.user,
                name=form.cleaned_data["name"],
                expires_in_days=form.expires_in_days(),
            )
        except ValidationError as exc:
            add_service_error(form, exc)
        else:
            # Rendered, not redirected: the plain token must never be stored, even in the session.
            context = _tokens_context(
                request, form=ApiTokenCreateForm(), new_token=raw, new_token_name=token.name
            )
            return render(request, API_TOKENS, context)
    return render(request, API_TOKENS, _tokens_context(request, form=form))


@login_required
@require_POST
def api_token_revoke_view(request: HtmxHttpRequest, token_id: int) -> HttpResponse:
    token = get_object_or_404(api_tokens_for_user(user=request.user), pk=token_id)
    api_token_revoke(token=token)
    if request.htmx:
        context = _tokens_context(request, form=ApiTokenCreateForm())
        return render_page(request, API_TOKENS, context, partial="token-table")
    messages.success(request, f"Revoked “{token.name}”. Clients using it now get 401.")
    return redirect("teams:api_tokens")


def _ingest_tokens_context(
    me: Membership,
    *,
    form: IngestTokenCreateForm | None = None,
    new_token: str = "",
    new_token_name: str = "",
) -> dict[str, Any]:
    return {
        "team": me.team,
        "me": me,
        "tokens": ingest_tokens_for_team(team=me.team),
        "usage": ingest_usage_for_team(team=me.team),
        "form": (form or IngestTokenCreateForm()) if me.can_write else None,
        "new_token": new_token,
        "new_token_name": new_token_name,
        "site_url": settings.SITE_URL,
    }


@never_cache  # the page may carry a freshly created token
@login_required
@require_http_methods(["GET", "POST"])
def ingest_tokens(request: HtmxHttpRequest, team_slug: str) -> HttpResponse:
    if request.method != "POST":
        me = membership_for_user(user=request.user, team_slug=team_slug)
        return render(request, INGEST_TOKENS, _ingest_tokens_context(me))
    me = membership_for_writer(user=request.user, team_slug=team_slug)
    form = IngestTokenCreateForm(request.POST)
    if form.is_valid():
        try:
            token, raw = ingest_token_create(
                team=me.team, name=form.cleaned_data["name"], created_by=request.user
            )
        except ValidationError as exc:
            add_service_error(form, exc)
        else:
            # Rendered, not redirected: the plain token must never be stored, even in the session.
            context = _ingest_tokens_context(me, new_token=raw, new_token_name=token.name)
            return render(request, INGEST_TOKENS, context)
    return render(request, INGEST_TOKENS, _ingest_tokens_context(me, form=form))


@login_required
@require_POST
def ingest_token_revoke_view(
    request: HtmxHttpRequest, team_slug: str, token_id: int
) -> HttpResponse:
    me = membership_for_writer(user=request.user, team_slug=team_slug)
    token = get_object_or_404(ingest_tokens_for_team(team=me.team), pk=token_id)
    ingest_token_revoke(token=token)
    if request.htmx:
        context = _ingest_tokens_context(me)
        return render_page(request, INGEST_TOKENS, context, partial="ingest-token-table")
    messages.success(request, f"Revoked “{token.name}”. Senders using it now get 401.")
    return redirect("teams:ingest_tokens", team_slug=me.team.slug)
