"""Signing in and up, and answering an invitation."""

import math
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth import views as auth_views
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from apps.core.forms import add_service_error
from apps.core.htmx import HtmxHttpRequest
from apps.teams.client_ip import client_ip_address
from apps.teams.current_team import current_team_remember
from apps.teams.forms import LoginForm, SignupForm
from apps.teams.models import Invitation, InvitationStatus, Membership
from apps.teams.ratelimit import signup_rate_consume
from apps.teams.selectors import invitation_by_token, membership_default_for_user
from apps.teams.services import invitation_accept, user_create
from apps.teams.services.invitations import CLOSED_MESSAGES
from apps.teams.signin_throttle import signin_address_paused
from apps.teams.views.email import verification_mail

INVITATION = "teams/invitation.html"
# Sign-up creates the user itself, so it names the backend that will load them again.
MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"


class LoginView(auth_views.LoginView):
    """Django's sign-in, landing on the user's default team, never on the first by name."""

    authentication_form = LoginForm
    redirect_authenticated_user = True

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context["allow_signup"] = settings.ALLOW_SIGNUP
        return context

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        wait = signin_address_paused(request=request)
        if wait:
            return _paused(request, wait, per_address=True)
        return super().post(request, *args, **kwargs)

    def form_valid(self, form: Any) -> HttpResponse:
        response = super().form_valid(form)
        default = membership_default_for_user(user=form.get_user())
        if default is not None:
            current_team_remember(self.request, default.team)
        return response


def login_locked_out(
    request: HttpRequest, original_response: Any = None, credentials: Any = None
) -> HttpResponse:
    """django-axes' answer once a username has failed too often from one address."""
    return _paused(request, settings.LOGIN_LOCKOUT_MINUTES * 60, per_address=False)


def _paused(request: HttpRequest, wait: int, *, per_address: bool) -> HttpResponse:
    context = {
        "minutes": math.ceil(wait / 60),
        "per_address": per_address,
        "allow_signup": settings.ALLOW_SIGNUP,
    }
    response = render(request, "registration/locked_out.html", context, status=429)
    response["Retry-After"] = str(wait)
    return response


def _pending_invitation(token: str) -> Invitation | None:
    invitation = invitation_by_token(raw=token) if token else None
    if invitation is None or invitation.status != InvitationStatus.PENDING:
        return None
    return invitation


def _signup_throttled(request: HtmxHttpRequest) -> HttpResponse | None:
    """Count this attempt against the address's hourly allowance; the 429 once it is spent.

    Every attempt counts, failed ones too: the form tells whether a username or an
    address is taken, and must not become a way to ask that at speed."""
    wait = signup_rate_consume(client_ip=client_ip_address(request) or "unknown")
    if not wait:
        return None
    context = {"minutes": math.ceil(wait / 60)}
    response = render(request, "registration/signup_throttled.html", context, status=429)
    response["Retry-After"] = str(wait)
    return response


@require_http_methods(["GET", "POST"])
def signup(request: HtmxHttpRequest) -> HttpResponse:
    token = request.POST.get("invitation") or request.GET.get("invitation") or ""
    invitation = _pending_invitation(token)
    if request.user.is_authenticated:
        return redirect("invitation", token=token) if invitation else redirect("home")
    # A pending invitation opens sign-up even when it is closed: the owner who sent it
    # vouches for the address it went to.
    if not settings.ALLOW_SIGNUP and invitation is None:
        return render(request, "registration/signup_closed.html", status=404)
    if request.method == "POST" and (refused := _signup_throttled(request)):
        return refused
    initial = {"email": invitation.email} if invitation else None
    form = SignupForm(request.POST or None, initial=initial)
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
            login(request, user, backend=MODEL_BACKEND)
            _verification_offered(request, invitation)
            if invitation is not None:
                messages.success(
                    request, f"Welcome! Accept the invitation to join {invitation.team}."
                )
                return redirect("invitation", token=token)
            messages.success(request, "Welcome! Create a team to start defining budgets.")
            return redirect("teams:create")
    context = {
        "form": form,
        "invitation": invitation,
        "invitation_token": token if invitation else "",
    }
    return render(request, "registration/signup.html", context)


def _verification_offered(request: HtmxHttpRequest, invitation: Invitation | None) -> None:
    """Mail the new user a link to verify their address, unless accepting the invitation
    they came with will: it was mailed to that address."""
    if invitation is not None and invitation.email.lower() == request.user.email.lower():
        return
    try:
        verification_mail(request)
    except ValidationError:
        messages.warning(
            request,
            "Your address could not be sent a verification link just now; ask for one "
            "from the E-mail address page in your menu.",
        )


def _invitation_page(
    request: HtmxHttpRequest,
    invitation: Invitation | None,
    token: str,
    *,
    error: str = "",
    status: int | None = None,
) -> HttpResponse:
    if invitation is None:
        return render(request, INVITATION, {"invalid": True}, status=404)
    state = invitation.status
    pending = state == InvitationStatus.PENDING
    membership = None
    if request.user.is_authenticated:
        membership = Membership.objects.filter(team=invitation.team, user=request.user).first()
    context = {
        "invitation": invitation,
        "token": token,
        "pending": pending,
        "closed_message": CLOSED_MESSAGES.get(state, ""),
        "membership": membership,
        "error": error,
        "allow_signup": settings.ALLOW_SIGNUP,
    }
    # 410 Gone: the link was real but can no longer be used.
    return render(request, INVITATION, context, status=status or (200 if pending else 410))


@never_cache
@require_http_methods(["GET", "POST"])
def invitation(request: HtmxHttpRequest, token: str) -> HttpResponse:
    """The link in the e-mail: what it offers on GET; accepting it is a POST, signed in."""
    found = invitation_by_token(raw=token)
    if request.method != "POST" or found is None:
        return _invitation_page(request, found, token)
    if not request.user.is_authenticated:
        return redirect_to_login(reverse("invitation", kwargs={"token": token}))
    try:
        membership = invitation_accept(invitation=found, user=request.user)
    except ValidationError as exc:
        status = 409 if exc.code == "member" else 410
        return _invitation_page(request, found, token, error=" ".join(exc.messages), status=status)
    current_team_remember(request, membership.team)
    messages.success(
        request, f"You joined {membership.team} as {membership.get_role_display().lower()}."
    )
    return redirect("dashboards:team_home", team_slug=membership.team.slug)
