"""A team's members and invitations: everyone sees the list, owners manage it."""

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect

from apps.core.forms import add_service_error
from apps.core.htmx import HtmxHttpRequest, render_page
from apps.teams.access import membership_for_owner, membership_for_user
from apps.teams.current_team import current_team_forget
from apps.teams.forms import InvitationCreateForm, RoleChangeForm
from apps.teams.models import Membership, Role
from apps.teams.selectors import invitations_open_for_team, memberships_for_team
from apps.teams.services import (
    invitation_create,
    invitation_resend,
    invitation_revoke,
    membership_change_role,
    membership_remove,
)

MEMBERS = "teams/members.html"


def _messages_of(error: ValidationError) -> str:
    return " ".join(error.messages)


def _members_context(
    me: Membership,
    *,
    invite_form: InvitationCreateForm | None = None,
    member_error: str = "",
    invitation_error: str = "",
) -> dict[str, Any]:
    # E-mail addresses and invitations are the owners' to see: editors and viewers get
    # usernames only, so joining a team discloses nobody's address to its other members.
    return {
        "team": me.team,
        "me": me,
        "memberships": memberships_for_team(team=me.team),
        "roles": Role.choices,
        "invite_form": (invite_form or InvitationCreateForm()) if me.is_owner else None,
        "invitations": invitations_open_for_team(team=me.team) if me.is_owner else None,
        "member_error": member_error,
        "invitation_error": invitation_error,
        "invitation_expiry_days": settings.INVITATION_EXPIRY_DAYS,
    }


@login_required
@require_http_methods(["GET", "POST"])
def members(request: HtmxHttpRequest, team_slug: str) -> HttpResponse:
    if request.method != "POST":
        me = membership_for_user(user=request.user, team_slug=team_slug)
        return render(request, MEMBERS, _members_context(me))
    me = membership_for_owner(user=request.user, team_slug=team_slug)
    form = InvitationCreateForm(request.POST)
    if form.is_valid():
        try:
            invitation, _ = invitation_create(
                team=me.team,
                email=form.cleaned_data["email"],
                role=form.cleaned_data["role"],
                invited_by=request.user,
            )
        except ValidationError as exc:
            add_service_error(form, exc)
        else:
            # The same answer whether or not the address has an account.
            messages.success(
                request,
                f"Invitation sent to {invitation.email}. They join once they accept it.",
            )
            return redirect("teams:members", team_slug=me.team.slug)
    return render(request, MEMBERS, _members_context(me, invite_form=form))


def _after_action(
    request: HtmxHttpRequest, me: Membership, *, table: str, error: str, success: str
) -> HttpResponse:
    """Swap ``table`` (a partial of the page) in place for htmx; otherwise report and redirect."""
    if request.htmx:
        # The actor may have changed their own role; render what they may now do.
        me.refresh_from_db()
        context = _members_context(
            me,
            member_error=error if table == "member" else "",
            invitation_error=error if table == "invitation" else "",
        )
        return render_page(request, MEMBERS, context, partial=f"{table}-table")
    return _reported(request, me, error=error, success=success)


def _after_member_action(
    request: HtmxHttpRequest, me: Membership, *, error: str, success: str
) -> HttpResponse:
    return _after_action(request, me, table="member", error=error, success=success)


def _reported(
    request: HtmxHttpRequest, me: Membership, *, error: str, success: str
) -> HttpResponse:
    """Without htmx: the outcome as a message on the members page."""
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


def _after_invitation_action(
    request: HtmxHttpRequest, me: Membership, *, error: str, success: str
) -> HttpResponse:
    return _after_action(request, me, table="invitation", error=error, success=success)


@login_required
@require_POST
def invitation_resend_view(
    request: HtmxHttpRequest, team_slug: str, invitation_id: int
) -> HttpResponse:
    me = membership_for_owner(user=request.user, team_slug=team_slug)
    invitation = get_object_or_404(invitations_open_for_team(team=me.team), pk=invitation_id)
    try:
        invitation_resend(invitation=invitation, sent_by=request.user)
    except ValidationError as exc:
        return _after_invitation_action(request, me, error=_messages_of(exc), success="")
    success = f"Sent the invitation to {invitation.email} again; the earlier link no longer works."
    return _after_invitation_action(request, me, error="", success=success)


@login_required
@require_POST
def invitation_revoke_view(
    request: HtmxHttpRequest, team_slug: str, invitation_id: int
) -> HttpResponse:
    me = membership_for_owner(user=request.user, team_slug=team_slug)
    invitation = get_object_or_404(invitations_open_for_team(team=me.team), pk=invitation_id)
    try:
        invitation_revoke(invitation=invitation)
    except ValidationError as exc:
        return _after_invitation_action(request, me, error=_messages_of(exc), success="")
    success = f"Withdrew the invitation to {invitation.email}; its link no longer works."
    return _after_invitation_action(request, me, error="", success=success)
