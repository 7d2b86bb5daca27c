from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect

from apps.core.htmx import HtmxHttpRequest, render_page
from apps.teams.access import membership_for_owner, membership_for_user, membership_for_writer
from apps.teams.current_team import current_team_forget, current_team_remember
from apps.teams.forms import (
    ApiTokenCreateForm,
    IngestTokenCreateForm,
    MemberAddForm,
    RoleChangeForm,
    SignupForm,
    TeamCreateForm,
    add_service_error,
)
from apps.teams.models import Membership, Role
from apps.teams.selectors import (
    api_tokens_for_user,
    ingest_tokens_for_team,
    memberships_for_team,
)
from apps.teams.services import (
    api_token_create,
    api_token_revoke,
    ingest_token_create,
    ingest_token_revoke,
    membership_add,
    membership_change_role,
    membership_remove,
    team_create,
    user_create,
)

MEMBERS = "teams/members.html"
API_TOKENS = "teams/api_tokens.html"
INGEST_TOKENS = "teams/ingest_tokens.html"


def _messages_of(error: ValidationError) -> str:
    return " ".join(error.messages)


@require_http_methods(["GET", "POST"])
def signup(request: HtmxHttpRequest) -> HttpResponse:
    if request.user.is_authenticated:
        return redirect("home")
    form = SignupForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            user = user_create(
                username=form.cleaned_data["username"],
                email=form.cleaned_data["email"],
                password=form.cleaned_data["password1"],
            )
        except ValidationError as exc:
            add_service_error(form, exc)
        else:
            login(request, user)
            messages.success(request, "Welcome! Create a team to start defining budgets.")
            return redirect("teams:create")
    return render(request, "registration/signup.html", {"form": form})


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
@require_GET
def switch(request: HtmxHttpRequest, team_slug: str) -> HttpResponse:
    membership = membership_for_user(user=request.user, team_slug=team_slug)
    current_team_remember(request, membership.team)
    return redirect("dashboards:team_home", team_slug=membership.team.slug)


def _members_context(
    me: Membership, *, add_form: MemberAddForm | None = None, member_error: str = ""
) -> dict[str, Any]:
    return {
        "team": me.team,
        "me": me,
        "memberships": memberships_for_team(team=me.team),
        "roles": Role.choices,
        "add_form": (add_form or MemberAddForm()) if me.is_owner else None,
        "member_error": member_error,
    }


@login_required
@require_http_methods(["GET", "POST"])
def members(request: HtmxHttpRequest, team_slug: str) -> HttpResponse:
    if request.method != "POST":
        me = membership_for_user(user=request.user, team_slug=team_slug)
        return render(request, MEMBERS, _members_context(me))
    me = membership_for_owner(user=request.user, team_slug=team_slug)
    form = MemberAddForm(request.POST)
    if form.is_valid():
        try:
            added = membership_add(
                team=me.team,
                identifier=form.cleaned_data["identifier"],
                role=form.cleaned_data["role"],
            )
        except ValidationError as exc:
            add_service_error(form, exc)
        else:
            messages.success(request, f"Added {added.user} as {added.get_role_display()}.")
            return redirect("teams:members", team_slug=me.team.slug)
    return render(request, MEMBERS, _members_context(me, add_form=form))


def _after_member_action(
    request: HtmxHttpRequest, me: Membership, *, error: str, success: str
) -> HttpResponse:
    """Swap the member table in place for htmx; otherwise report and redirect."""
    if request.htmx:
        # The actor may have changed their own role; render what they may now do.
        me.refresh_from_db()
        context = _members_context(me, member_error=error)
        return render_page(request, MEMBERS, context, partial="member-table")
    if error:
        messages.error(request, error)
    else:
        messages.success(request, success)
    return redirect("teams:members", team_slug=me.team.slug)


@login_required
@require_POST
def member_role(request: HtmxHttpRequest, team_slug: str, membership_id: int) -> HttpResponse:
    me = membership_for_owner(user=request.user, team_slug=team_slug)
    target = get_object_or_404(memberships_for_team(team=me.team), pk=membership_id)
    form = RoleChangeForm(request.POST)
    error = ""
    if not form.is_valid():
        error = "Choose a role: owner, editor or viewer."
    else:
        try:
            membership_change_role(membership=target, role=form.cleaned_data["role"])
        except ValidationError as exc:
            error = _messages_of(exc)
    success = f"{target.user} is now {target.get_role_display().lower()}."
    return _after_member_action(request, me, error=error, success=success)


@login_required
@require_POST
def member_remove(request: HtmxHttpRequest, team_slug: str, membership_id: int) -> HttpResponse:
    me = membership_for_owner(user=request.user, team_slug=team_slug)
    target = get_object_or_404(memberships_for_team(team=me.team), pk=membership_id)
    removing_self = target.pk == me.pk  # compared first: delete() clears target.pk
    try:
        membership_remove(membership=target)
    except ValidationError as exc:
        return _after_member_action(request, me, error=_messages_of(exc), success="")
    if removing_self:
        return _left_team(request, me)
    return _after_member_action(
        request, me, error="", success=f"Removed {target.user} from {me.team}."
    )


def _left_team(request: HtmxHttpRequest, me: Membership) -> HttpResponse:
    current_team_forget(request, me.team)
    messages.success(request, f"You left {me.team}.")
    if request.htmx:
        return HttpResponseClientRedirect(reverse("home"))
    return redirect("home")


@login_required
@require_POST
def leave(request: HtmxHttpRequest, team_slug: str) -> HttpResponse:
    me = membership_for_user(user=request.user, team_slug=team_slug)
    try:
        membership_remove(membership=me)
    except ValidationError as exc:
        messages.error(request, _messages_of(exc))
        return redirect("teams:members", team_slug=me.team.slug)
    return _left_team(request, me)


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
            token, raw = api_token_create(user=request.user, name=form.cleaned_data["name"])
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
