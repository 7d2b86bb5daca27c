"""Alert rules: the list with each scope's state, the rule form, silences."""

from dataclasses import dataclass
from datetime import UTC
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.alerts.access import rule_for_user
from apps.alerts.forms import RuleForm, SilenceForm
from apps.alerts.labels import StateRow, condition_words, scope_words, state_rows
from apps.alerts.models import AlertRule
from apps.alerts.selectors.history import channels_for_team, rules_for_team
from apps.alerts.services.rules import (
    alert_rule_create,
    alert_rule_delete,
    alert_rule_silence,
    alert_rule_unsilence,
    alert_rule_update,
)
from apps.core.forms import add_service_error
from apps.core.htmx import HtmxHttpRequest
from apps.pipelines.models import Pipeline
from apps.pipelines.selectors import pipelines_for_team
from apps.teams.access import membership_for_user, membership_for_writer
from apps.teams.current_team import current_team_remember
from apps.teams.models import Membership

RULES = "alerts/rules.html"
RULE_FORM = "alerts/rule_form.html"
SILENCE = "alerts/silence.html"
DELETE = "alerts/delete.html"
SERVICE_ERRORS = {
    "burn_windows": "condition",
    "silenced_until": "until",
    "silence_reason": "reason",
}


@dataclass(frozen=True)
class RuleRow:
    rule: AlertRule
    condition: str
    scope: str
    states: list[StateRow]
    silenced: bool


def _pipelines(membership: Membership) -> list[Pipeline]:
    return list(pipelines_for_team(team=membership.team).prefetch_related("stages"))


@login_required
@require_GET
def rule_list(request: HtmxHttpRequest, team_slug: str) -> HttpResponse:
    membership = membership_for_user(user=request.user, team_slug=team_slug)
    current_team_remember(request, membership.team)
    pipelines = _pipelines(membership)
    stage_names = {s.pk: s.name for p in pipelines for s in p.stages.all()}
    now = timezone.now()
    rows = [
        RuleRow(
            rule=rule,
            condition=condition_words(rule),
            scope=scope_words(rule),
            states=state_rows(rule, stage_names),
            silenced=rule.silenced_until is not None and rule.silenced_until > now,
        )
        for rule in rules_for_team(team=membership.team)
    ]
    context = {
        "team": membership.team,
        "can_write": membership.can_write,
        "rows": rows,
        "has_pipelines": bool(pipelines),
        "has_channels": channels_for_team(team=membership.team).exists(),
    }
    return render(request, RULES, context)


def _form(
    request: HtmxHttpRequest, membership: Membership, rule: AlertRule | None = None
) -> RuleForm:
    kwargs: dict[str, Any] = {
        "pipelines": _pipelines(membership),
        "channels": list(channels_for_team(team=membership.team)),
        "rule": rule,
    }
    if request.method == "POST":
        return RuleForm(request.POST, **kwargs)
    return RuleForm(initial=RuleForm.initial_for(rule) if rule else None, **kwargs)


def _form_page(
    request: HtmxHttpRequest, membership: Membership, form: RuleForm, rule: AlertRule | None
) -> HttpResponse:
    context = {"team": membership.team, "form": form, "rule": rule}
    return render(request, RULE_FORM, context, status=422 if form.errors else 200)


@login_required
@require_http_methods(["GET", "POST"])
def rule_create_view(request: HtmxHttpRequest, team_slug: str) -> HttpResponse:
    membership = membership_for_writer(user=request.user, team_slug=team_slug)
    form = _form(request, membership)
    if form.is_bound and form.is_valid():
        try:
            rule = alert_rule_create(team=membership.team, **form.service_kwargs())
        except ValidationError as exc:
            add_service_error(form, exc, SERVICE_ERRORS)
        else:
            messages.success(request, f"Alert rule “{rule}” created.")
            return redirect("alerts:rules", team_slug=team_slug)
    return _form_page(request, membership, form, None)


@login_required
@require_http_methods(["GET", "POST"])
def rule_edit(request: HtmxHttpRequest, team_slug: str, rule_slug: str) -> HttpResponse:
    membership, rule = rule_for_user(
        user=request.user, team_slug=team_slug, rule_slug=rule_slug, write=True
    )
    form = _form(request, membership, rule)
    if form.is_bound and form.is_valid():
        fields = form.service_kwargs()
        try:
            rule = alert_rule_update(rule=rule, channels=fields.pop("channels"), **fields)
        except ValidationError as exc:
            add_service_error(form, exc, SERVICE_ERRORS)
        else:
            messages.success(request, f"Alert rule “{rule}” saved.")
            return redirect("alerts:rules", team_slug=team_slug)
    return _form_page(request, membership, form, rule)


@login_required
@require_http_methods(["GET", "POST"])
def rule_delete_view(request: HtmxHttpRequest, team_slug: str, rule_slug: str) -> HttpResponse:
    membership, rule = rule_for_user(
        user=request.user, team_slug=team_slug, rule_slug=rule_slug, write=True
    )
    if request.method == "POST":
        alert_rule_delete(rule=rule)
        messages.success(request, f"Alert rule “{rule}” deleted.")
        return redirect("alerts:rules", team_slug=team_slug)
    context = {"team": membership.team, "what": "rule", "object": rule, "cancel": "alerts:rules"}
    return render(request, DELETE, context)


@login_required
@require_http_methods(["GET", "POST"])
def rule_silence(request: HtmxHttpRequest, team_slug: str, rule_slug: str) -> HttpResponse:
    membership, rule = rule_for_user(
        user=request.user, team_slug=team_slug, rule_slug=rule_slug, write=True
    )
    form = SilenceForm(request.POST if request.method == "POST" else None)
    if form.is_bound and form.is_valid():
        try:
            rule = alert_rule_silence(rule=rule, **form.service_kwargs())
        except ValidationError as exc:
            add_service_error(form, exc, SERVICE_ERRORS)
        else:
            until = form.cleaned_data["until"].astimezone(UTC).strftime("%Y-%m-%d %H:%M")
            messages.success(request, f"“{rule}” is silenced until {until} UTC.")
            return redirect("alerts:rules", team_slug=team_slug)
    context = {"team": membership.team, "rule": rule, "form": form}
    return render(request, SILENCE, context, status=422 if form.errors else 200)


@login_required
@require_POST
def rule_unsilence(request: HtmxHttpRequest, team_slug: str, rule_slug: str) -> HttpResponse:
    _, rule = rule_for_user(user=request.user, team_slug=team_slug, rule_slug=rule_slug, write=True)
    alert_rule_unsilence(rule=rule)
    messages.success(request, f"“{rule}” notifies again.")
    return redirect("alerts:rules", team_slug=team_slug)
