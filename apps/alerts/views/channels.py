"""Channels: where notifications go, each with its last delivery result and a test button.

A test is sent by the worker like any notification: the button's answer shows it
pending, and that fragment asks again every 2 s until it is delivered or failed.
"""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.alerts.access import channel_for_user
from apps.alerts.forms import CHANNEL_FORMS
from apps.alerts.labels import ChannelRow, channel_row, channel_rows
from apps.alerts.models import ChannelKind
from apps.alerts.selectors.history import channel_last_notification, channels_for_team
from apps.alerts.services.channels import (
    channel_create,
    channel_delete,
    channel_enable,
    channel_secret_rotate,
    channel_update,
)
from apps.alerts.services.notifications import notification_test_send
from apps.core.forms import add_service_error
from apps.core.htmx import HtmxHttpRequest, render_page
from apps.teams.access import membership_for_user, membership_for_writer
from apps.teams.current_team import current_team_remember
from apps.teams.models import Team

CHANNELS = "alerts/channels.html"
CHANNEL_FORM = "alerts/channel_form.html"
DELETE = "alerts/delete.html"
FORM_ERRORS = {"email_to": "addresses"}


@login_required
@require_GET
def channel_list(request: HtmxHttpRequest, team_slug: str) -> HttpResponse:
    membership = membership_for_user(user=request.user, team_slug=team_slug)
    current_team_remember(request, membership.team)
    can_write = membership.can_write
    channels = list(channels_for_team(team=membership.team))
    context = {
        "team": membership.team,
        "can_write": can_write,
        "rows": channel_rows(team=membership.team, channels=channels, can_write=can_write),
        "kinds": ChannelKind.choices,
    }
    return render(request, CHANNELS, context)


def _form_page(request: HtmxHttpRequest, context: dict[str, object]) -> HttpResponse:
    form = context["form"]
    status = 422 if getattr(form, "errors", None) else 200
    return render(request, CHANNEL_FORM, context, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def channel_create_view(request: HtmxHttpRequest, team_slug: str, kind: str) -> HttpResponse:
    membership = membership_for_writer(user=request.user, team_slug=team_slug)
    form_class = CHANNEL_FORMS.get(kind)
    if form_class is None:
        raise Http404("No such kind of channel.")
    form = form_class(request.POST if request.method == "POST" else None)
    if form.is_bound and form.is_valid():
        try:
            channel = channel_create(team=membership.team, kind=kind, **form.service_kwargs())
        except ValidationError as exc:
            add_service_error(form, exc, FORM_ERRORS)
        else:
            messages.success(request, f"Channel “{channel}” added. Send it a test.")
            if channel.url_warning:
                messages.warning(request, f"Saved, but note: {channel.url_warning}")
            if channel.kind == ChannelKind.WEBHOOK:
                # The signing secret is on the edit page, for the receiver to copy.
                return redirect(
                    "alerts:channel_edit", team_slug=team_slug, channel_slug=channel.slug
                )
            return redirect("alerts:channels", team_slug=team_slug)
    return _form_page(request, {"team": membership.team, "form": form, "kind": kind})


@login_required
@require_http_methods(["GET", "POST"])
def channel_edit(request: HtmxHttpRequest, team_slug: str, channel_slug: str) -> HttpResponse:
    membership, channel = channel_for_user(
        user=request.user, team_slug=team_slug, channel_slug=channel_slug, write=True
    )
    form_class = CHANNEL_FORMS[channel.kind]
    form = form_class(initial=form_class.initial_for(channel), channel=channel)
    if request.method == "POST":
        form = form_class(request.POST, channel=channel)
        if form.is_valid():
            try:
                channel = channel_update(channel=channel, **form.service_kwargs())
            except ValidationError as exc:
                add_service_error(form, exc, FORM_ERRORS)
            else:
                messages.success(request, f"Channel “{channel}” saved.")
                if channel.url_warning:
                    messages.warning(request, f"Saved, but note: {channel.url_warning}")
                return redirect("alerts:channels", team_slug=team_slug)
    context = {"team": membership.team, "form": form, "kind": channel.kind, "channel": channel}
    return _form_page(request, context)


@login_required
@require_http_methods(["GET", "POST"])
def channel_delete_view(
    request: HtmxHttpRequest, team_slug: str, channel_slug: str
) -> HttpResponse:
    membership, channel = channel_for_user(
        user=request.user, team_slug=team_slug, channel_slug=channel_slug, write=True
    )
    if request.method == "POST":
        channel_delete(channel=channel)
        messages.success(request, f"Channel “{channel}” deleted.")
        return redirect("alerts:channels", team_slug=team_slug)
    context = {
        "team": membership.team,
        "what": "channel",
        "object": channel,
        "rules": list(channel.rules.order_by("slug")),
        "cancel": "alerts:channels",
    }
    return render(request, DELETE, context)


def _result(
    request: HtmxHttpRequest, row: ChannelRow, team: Team, refusal: str = ""
) -> HttpResponse:
    context = {"team": team, "row": row, "can_write": row.can_write, "refusal": refusal}
    return render_page(request, CHANNELS, context, partial="channel_result")


@login_required
@require_POST
def channel_test(request: HtmxHttpRequest, team_slug: str, channel_slug: str) -> HttpResponse:
    membership, channel = channel_for_user(
        user=request.user, team_slug=team_slug, channel_slug=channel_slug, write=True
    )
    if not channel.is_enabled:
        return HttpResponseBadRequest("Enable the channel again before sending it a test.")
    try:
        notification = notification_test_send(channel=channel, now=timezone.now())
    except ValidationError as exc:
        if not request.htmx:
            messages.error(request, " ".join(exc.messages))
            return redirect("alerts:channels", team_slug=team_slug)
        last = channel_last_notification(channel=channel)
        return _result(
            request, ChannelRow(channel, last, True), membership.team, " ".join(exc.messages)
        )
    if not request.htmx:
        messages.success(request, f"A test is on its way to “{channel}”; its result shows below.")
        return redirect("alerts:channels", team_slug=team_slug)
    return _result(request, ChannelRow(channel, notification, True), membership.team)


@login_required
@require_GET
def channel_result(request: HtmxHttpRequest, team_slug: str, channel_slug: str) -> HttpResponse:
    """The last delivery result alone, which a pending test asks for until it is sent."""
    membership, channel = channel_for_user(
        user=request.user, team_slug=team_slug, channel_slug=channel_slug
    )
    if not request.htmx:
        return redirect("alerts:channels", team_slug=team_slug)
    return _result(request, channel_row(channel, can_write=membership.can_write), membership.team)


@login_required
@require_POST
def channel_enable_view(
    request: HtmxHttpRequest, team_slug: str, channel_slug: str
) -> HttpResponse:
    _, channel = channel_for_user(
        user=request.user, team_slug=team_slug, channel_slug=channel_slug, write=True
    )
    channel_enable(channel=channel)
    messages.success(request, f"Channel “{channel}” is enabled again. Send it a test.")
    return redirect("alerts:channels", team_slug=team_slug)


@login_required
@require_POST
def channel_rotate(request: HtmxHttpRequest, team_slug: str, channel_slug: str) -> HttpResponse:
    _, channel = channel_for_user(
        user=request.user, team_slug=team_slug, channel_slug=channel_slug, write=True
    )
    if channel.kind != ChannelKind.WEBHOOK:
        return HttpResponseBadRequest("Only webhooks have a signing secret.")
    channel_secret_rotate(channel=channel)
    messages.success(
        request,
        "New signing secret made: give it to the receiver now, which will refuse messages "
        "signed with it until then.",
    )
    return redirect("alerts:channel_edit", team_slug=team_slug, channel_slug=channel.slug)
