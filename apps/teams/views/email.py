"""The user's e-mail address: whether it is verified, a link to verify it, and the link."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.core.htmx import HtmxHttpRequest
from apps.teams.models import EmailVerification
from apps.teams.ratelimit import RateExceeded
from apps.teams.selectors import user_email_verified
from apps.teams.services import (
    email_verification_check,
    email_verification_confirm,
    email_verification_send,
)

ACCOUNT_EMAIL = "teams/account_email.html"
VERIFY = "teams/email_verify.html"


def _page(request: HtmxHttpRequest, *, error: str = "", status: int = 200) -> HttpResponse:
    user = request.user
    context = {
        "verified": user_email_verified(user=user),
        "verification": EmailVerification.objects.filter(user=user).first(),
        "error": error,
        "email_page": True,
    }
    return render(request, ACCOUNT_EMAIL, context, status=status)


@login_required
@require_GET
def account_email(request: HtmxHttpRequest) -> HttpResponse:
    return _page(request)


def verification_mail(request: HtmxHttpRequest) -> None:
    """Mail the signed-in user a verification link and say so; raises ValidationError."""
    email_verification_send(user=request.user)
    messages.success(
        request,
        f"A link to verify {request.user.email} is on its way: open it signed in to this account.",
    )


@login_required
@require_POST
def account_email_send(request: HtmxHttpRequest) -> HttpResponse:
    try:
        verification_mail(request)
    except RateExceeded as exc:
        response = _page(request, error=" ".join(exc.messages), status=429)
        response["Retry-After"] = str(exc.retry_after_s)
        return response
    except ValidationError as exc:
        return _page(request, error=" ".join(exc.messages), status=400)
    return redirect("account_email")


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def account_email_verify(request: HtmxHttpRequest, token: str) -> HttpResponse:
    """The link in the e-mail: a button on GET; verifying is a POST, signed in."""
    try:
        email_verification_check(user=request.user, token=token)
    except ValidationError as exc:
        context = {"error": " ".join(exc.messages), "email_page": True}
        return render(request, VERIFY, context, status=410 if exc.code == "expired" else 400)
    if request.method != "POST":
        return render(request, VERIFY, {"token": token, "email_page": True})
    email_verification_confirm(user=request.user, token=token)
    messages.success(request, f"{request.user.email} is verified.")
    return redirect("account_email")
