"""A team's metrics tokens and how to scrape ``/metrics`` with them."""

from typing import Any
from urllib.parse import urlsplit

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
from apps.teams.forms import MetricsTokenCreateForm
from apps.teams.models import Membership
from apps.teams.selectors import metrics_tokens_for_team
from apps.teams.services import metrics_token_create, metrics_token_revoke

METRICS_TOKENS = "teams/metrics_tokens.html"


def _context(
    me: Membership,
    *,
    form: MetricsTokenCreateForm | None = None,
    new_token: str = "",
    new_token_name: str = "",
) -> dict[str, Any]:
    site = urlsplit(settings.SITE_URL)
    return {
        "team": me.team,
        "me": me,
        "tokens": metrics_tokens_for_team(team=me.team),
        "form": (form or MetricsTokenCreateForm()) if me.can_write else None,
        "new_token": new_token,
        "new_token_name": new_token_name,
        "site_url": settings.SITE_URL,
        "scheme": site.scheme or "https",
        "target": site.netloc,
        "cache_seconds": settings.METRICS_CACHE_SECONDS,
        "scrapes_per_minute": settings.METRICS_SCRAPES_PER_MINUTE_PER_TOKEN,
    }


@never_cache  # the page may carry a freshly created token
@login_required
@require_http_methods(["GET", "POST"])
def metrics_tokens(request: HtmxHttpRequest, team_slug: str) -> HttpResponse:
    if request.method != "POST":
        me = membership_for_user(user=request.user, team_slug=team_slug)
        return render(request, METRICS_TOKENS, _context(me))
    # Writers only: a token outlives its creator's membership, so a viewer who made one
    # would keep reading the team's figures after leaving it.
    me = membership_for_writer(user=request.user, team_slug=team_slug)
    form = MetricsTokenCreateForm(request.POST)
    if form.is_valid():
        try:
            token, raw = metrics_token_create(
                team=me.team, name=form.cleaned_data["name"], created_by=request.user
            )
        except ValidationError as exc:
            add_service_error(form, exc)
        else:
            # Rendered, not redirected: the plain token must never be stored, even in the session.
            return render(
                request, METRICS_TOKENS, _context(me, new_token=raw, new_token_name=token.name)
            )
    return render(request, METRICS_TOKENS, _context(me, form=form))


@login_required
@require_POST
def metrics_token_revoke_view(
    request: HtmxHttpRequest, team_slug: str, token_id: int
) -> HttpResponse:
    me = membership_for_writer(user=request.user, team_slug=team_slug)
    token = get_object_or_404(metrics_tokens_for_team(team=me.team), pk=token_id)
    metrics_token_revoke(token=token)
    if request.htmx:
        return render_page(request, METRICS_TOKENS, _context(me), partial="metrics-token-table")
    messages.success(request, f"Revoked “{token.name}”. Scrapes using it now get 401.")
    return redirect("teams:metrics_tokens", team_slug=me.team.slug)
