"""An address's own answer to a channel, from the link in its e-mail, and a writer's
resend of a confirmation.

The link's page only shows buttons: a mail scanner that follows links confirms nothing
and declines nothing. The one-click unsubscribe (RFC 8058) is a POST from the mail
client, without the page, and only ever stops mail.
"""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods, require_POST

from apps.alerts.access import channel_for_user
from apps.alerts.models import ChannelRecipient, RecipientState
from apps.alerts.recipient_links import RecipientLink, recipient_by_token
from apps.alerts.selectors.recipients import recipient_status
from apps.alerts.services.recipients import recipient_answer, recipient_confirmation_resend
from apps.core.htmx import HtmxHttpRequest
from apps.core.mail import site_host
from apps.teams.accounts import account_verified

RECIPIENT = "alerts/recipient.html"
ANSWERS = ("confirm", "decline")


def _link(token: str) -> RecipientLink:
    link = recipient_by_token(token)
    if link is None:
        raise Http404("This link is not valid.")
    return link


def _page(request: HtmxHttpRequest, link: RecipientLink, token: str) -> HttpResponse:
    recipient = link.recipient
    context = {
        "recipient": recipient,
        "status": recipient_status(recipient=recipient),
        "token": token,
        "fresh": link.fresh,
        "channel": recipient.channel,
        "team": recipient.team,
        # The team's names only from a verified account, as in the e-mail.
        "named": account_verified(team=recipient.team),
        "site": site_host(),
    }
    return render(request, RECIPIENT, context)


@never_cache
@require_http_methods(["GET", "POST"])
def recipient_page(request: HtmxHttpRequest, token: str) -> HttpResponse:
    link = _link(token)
    answer = request.POST.get("answer") if request.method == "POST" else None
    if answer not in ANSWERS:
        return _page(request, link, token)
    confirm = answer == "confirm"
    if confirm and not link.fresh:
        # Too old to confirm with: the page says so and offers only the no.
        return _page(request, link, token)
    if link.recipient.channel is not None:
        recipient_answer(recipient=link.recipient, confirm=confirm)
    return redirect("recipient", token=token)


@csrf_exempt  # the mail client posts it, with the token as the only proof, and it only stops mail
@require_POST
def recipient_unsubscribe(request: HtmxHttpRequest, token: str) -> HttpResponse:
    link = _link(token)
    if link.recipient.state != RecipientState.DECLINED:
        recipient_answer(recipient=link.recipient, confirm=False)
    return HttpResponse(
        "Unsubscribed: nothing more is sent to this address through this channel.\n",
        content_type="text/plain",
    )


@login_required
@require_POST
def recipient_resend(
    request: HtmxHttpRequest, team_slug: str, channel_slug: str, recipient_id: int
) -> HttpResponse:
    _, channel = channel_for_user(
        user=request.user, team_slug=team_slug, channel_slug=channel_slug, write=True
    )
    recipient = get_object_or_404(ChannelRecipient, channel=channel, pk=recipient_id)
    try:
        recipient_confirmation_resend(channel=channel, address=recipient.email, now=timezone.now())
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(request, f"The confirmation is on its way to {recipient.email} again.")
    return redirect("alerts:channels", team_slug=team_slug)
