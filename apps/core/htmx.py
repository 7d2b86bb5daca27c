from typing import Any

from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.cache import patch_vary_headers
from django_htmx.middleware import HtmxDetails


class HtmxHttpRequest(HttpRequest):
    """Request type for views: django-htmx adds ``htmx``; login_required guarantees a user."""

    htmx: HtmxDetails
    user: User


def render_page(
    request: HtmxHttpRequest,
    template: str,
    context: dict[str, Any],
    *,
    partial: str | None = None,
    page: str | None = None,
    status: int = 200,
) -> HttpResponse:
    """``template``, or only its named ``partial`` when htmx swaps a region.

    Without ``partial`` the whole template is rendered for every request. ``page`` is
    for a partial that is no page of its own: requests without htmx get that page
    instead, with the partial's full name in the context as ``partial`` to include.
    htmx response headers (``retarget``, ``push_url``, ``trigger_client_event``…) go
    on the result with django_htmx.http.
    """
    if partial is None:
        return render(request, template, context, status=status)
    fragment = f"{template}#{partial}"
    # Going back to a pushed URL that htmx no longer holds in its history cache asks
    # for it with HX-Request too, and must get the whole page, not a fragment of it.
    if request.htmx and not request.htmx.history_restore_request:
        response = render(request, fragment, context, status=status)
    elif page is not None:
        response = render(request, page, {**context, "partial": fragment}, status=status)
    else:
        response = render(request, template, context, status=status)
    # The same URL answers with a page or a fragment: caches must keep them apart.
    patch_vary_headers(response, ("HX-Request",))
    return response
