from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.core.htmx import HtmxHttpRequest, render_page
from apps.pipelines.config_as_code import (
    ConfigApplyError,
    ConfigInvalid,
    Plan,
    PlanChanged,
    config_apply_text,
    config_export,
    config_preview,
)
from apps.pipelines.config_forms import ConfigApplyForm, ConfigUploadForm, preview_token
from apps.teams.access import membership_for_user, membership_for_writer
from apps.teams.current_team import current_team_remember
from apps.teams.models import Membership

TEMPLATE = "pipelines/config.html"


def _config_errors(exc: ConfigInvalid | ConfigApplyError) -> list[str]:
    if isinstance(exc, ConfigInvalid):
        return [f"Line {error.line}: {error.message}" for error in exc.errors]
    where = f"Line {exc.line}: " if exc.line else ""
    return [f"{where}{exc.message} Nothing was changed."]


def _export(membership: Membership) -> str:
    """Viewers get webhook URLs as the channel pages show them to viewers."""
    return config_export(team=membership.team, masked=not membership.can_write)


def _render(
    request: HtmxHttpRequest,
    membership: Membership,
    *,
    form: ConfigUploadForm | None = None,
    plan: Plan | None = None,
    token: str = "",
    notice: str = "",
    errors: list[str] | None = None,
    status: int = 200,
) -> HttpResponse:
    context: dict[str, Any] = {
        "team": membership.team,
        "membership": membership,
        "current_yaml": _export(membership),
        "form": form or ConfigUploadForm(),
        "plan": plan,
        "token": token,
        "notice": notice,
        "apply_errors": errors or [],
    }
    # Only a posted upload is answered in place; the page itself is never a fragment.
    partial = "upload" if request.method == "POST" else None
    return render_page(request, TEMPLATE, context, partial=partial, status=status)


def _preview(
    request: HtmxHttpRequest, membership: Membership, plan: Plan, text: str, prune: bool, **kw: Any
) -> HttpResponse:
    token = preview_token(
        team_slug=membership.team.slug, text=text, prune=prune, digest=plan.digest()
    )
    return _render(request, membership, plan=plan, token=token, **kw)


@login_required
@require_http_methods(["GET", "POST"])
def config_page(request: HtmxHttpRequest, team_slug: str) -> HttpResponse:
    """Show the team's configuration; a POST previews an uploaded file's changes."""
    if request.method != "POST":
        membership = membership_for_user(user=request.user, team_slug=team_slug)
        current_team_remember(request, membership.team)
        return _render(request, membership)
    membership = membership_for_writer(user=request.user, team_slug=team_slug)
    form = ConfigUploadForm(request.POST, request.FILES)
    if form.is_valid():
        text, prune = form.cleaned_data["document"], form.cleaned_data["prune"]
        try:
            plan = config_preview(team=membership.team, text=text, prune=prune)
        except (ConfigInvalid, ConfigApplyError) as exc:
            for error in _config_errors(exc):
                form.add_error(None, error)
        else:
            return _preview(request, membership, plan, text, prune, form=form)
    return _render(request, membership, form=form, status=422 if not request.htmx else 200)


@login_required
@require_POST
def config_apply(request: HtmxHttpRequest, team_slug: str) -> HttpResponse:
    membership = membership_for_writer(user=request.user, team_slug=team_slug)
    form = ConfigApplyForm(request.POST, team_slug=membership.team.slug)
    if not form.is_valid():
        return _render(
            request, membership, errors=[str(e) for e in form.errors["token"]], status=400
        )
    payload = form.cleaned_data["token"]
    try:
        plan = config_apply_text(
            team=membership.team,
            text=payload["text"],
            prune=payload["prune"],
            expected_digest=payload["digest"],
        )
    except PlanChanged as changed:
        notice = "The configuration changed since your preview. Review the new changes."
        return _preview(
            request, membership, changed.plan, payload["text"], payload["prune"], notice=notice
        )
    except (ConfigInvalid, ConfigApplyError) as exc:
        return _render(request, membership, errors=_config_errors(exc), status=422)
    count = len(plan.changes)
    messages.success(
        request, f"Applied {count} change{'s' if count != 1 else ''}." if count else "No changes."
    )
    return redirect("config:page", team_slug=membership.team.slug)


@login_required
@require_GET
def config_download(request: HtmxHttpRequest, team_slug: str) -> HttpResponse:
    membership = membership_for_user(user=request.user, team_slug=team_slug)
    response = HttpResponse(_export(membership), content_type="text/yaml; charset=utf-8")
    filename = f"{membership.team.slug}-budgets.yaml"
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
