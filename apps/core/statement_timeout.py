"""A statement timeout on the web processes' database connections.

Anyone may sign up, so no page or API request may hold a database backend, and the
web worker waiting on it, for long, whatever a team stored or asked for. The web
processes (gunicorn and the development server both load ``budgets_site.wsgi``) set
PostgreSQL's ``statement_timeout`` on every connection they open. Workers and
management commands do not: their passes set their own (``PASS_STATEMENT_TIMEOUT_S``)
and a migration must never be cut short.

A statement cut short answers a clean 503 with ``Retry-After``: a page saying what
happened, or the API's error body. The connection stays usable (the statement alone
is rolled back).
"""

from typing import Any

import psycopg
from django.conf import settings
from django.db import OperationalError
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.signals import connection_created
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

RETRY_AFTER_S = 30
TIMEOUT_PAGE = "timeout.html"


def statement_timeout_set(*, connection: BaseDatabaseWrapper) -> None:
    """Give this connection the web's statement timeout (0 leaves it without one)."""
    milliseconds = round(settings.WEB_STATEMENT_TIMEOUT_S * 1000)
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config('statement_timeout', %s, false)", [f"{milliseconds}ms"])


def _on_connection_created(sender: Any, connection: BaseDatabaseWrapper, **kwargs: Any) -> None:
    statement_timeout_set(connection=connection)


def web_statement_timeout_enable() -> None:
    """Called once by the WSGI module: every connection this process opens gets the timeout."""
    connection_created.connect(_on_connection_created, dispatch_uid="web-statement-timeout")


def is_statement_timeout(exc: BaseException) -> bool:
    """Whether ``exc`` is PostgreSQL cancelling a statement that ran past its timeout."""
    return isinstance(exc, OperationalError) and isinstance(
        exc.__cause__, psycopg.errors.QueryCanceled
    )


class StatementTimeoutMiddleware:
    """Turns a statement cut short into a page that says so, instead of a server error."""

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response: HttpResponse = self.get_response(request)
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not is_statement_timeout(exception):
            return None
        context = {"seconds": settings.WEB_STATEMENT_TIMEOUT_S}
        response = render(request, TIMEOUT_PAGE, context, status=503)
        response["Retry-After"] = str(RETRY_AFTER_S)
        return response
