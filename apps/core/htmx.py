from django.contrib.auth.models import User
from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails


class HtmxHttpRequest(HttpRequest):
    """Request type for views: django-htmx adds ``htmx``; login_required guarantees a user."""

    htmx: HtmxDetails
    user: User
