"""One error body for every API failure.

``{"error": {"code": "...", "message": "...", "fields": {...}}}`` — ``fields`` only
for validation errors, mapping a field (dotted for nested ones) to its messages.
"""

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from django.core.exceptions import NON_FIELD_ERRORS, PermissionDenied, RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import exception_handler as drf_exception_handler

from apps.core.api.parsers import RequestTooLarge
from apps.core.statement_timeout import RETRY_AFTER_S, is_statement_timeout


class StatementTimedOut(exceptions.APIException):
    status_code = 503
    default_code = "timeout"
    default_detail = (
        "Answering needed more of the database than one request may take; nothing was "
        "changed. Retry later, or ask for less (a shorter window, fewer traces)."
    )

    def __init__(self) -> None:
        super().__init__()
        # DRF sends Retry-After for an exception with ``wait``.
        self.wait = RETRY_AFTER_S


def _messages_by_field(exc: DjangoValidationError) -> dict[str, list[str]]:
    return exc.message_dict if hasattr(exc, "error_dict") else {NON_FIELD_ERRORS: exc.messages}


def _flatten(detail: Any, prefix: str = "") -> dict[str, list[str]]:
    if isinstance(detail, dict):
        out: dict[str, list[str]] = {}
        for key, value in detail.items():
            name = f"{prefix}.{key}" if prefix else str(key)
            out.update(_flatten(value, name))
        return out
    if isinstance(detail, list):
        if all(not isinstance(item, dict | list) for item in detail):
            return {prefix or "non_field_errors": [str(item) for item in detail]}
        out = {}
        for index, item in enumerate(detail):
            out.update(_flatten(item, f"{prefix}.{index}" if prefix else str(index)))
        return out
    return {prefix or "non_field_errors": [str(detail)]}


@contextmanager
def api_field_names(renames: Mapping[str, str]) -> Iterator[None]:
    """Report a service's model-field errors under the API's field names."""
    try:
        yield
    except DjangoValidationError as exc:
        fields: dict[str, list[str]] = {}
        for field, messages in _messages_by_field(exc).items():
            fields.setdefault(renames.get(field, field), []).extend(messages)
        raise DjangoValidationError(fields) from exc


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, DjangoValidationError):
        non_field = api_settings.NON_FIELD_ERRORS_KEY
        exc = exceptions.ValidationError(
            {
                (non_field if field == NON_FIELD_ERRORS else field): messages
                for field, messages in _messages_by_field(exc).items()
            }
        )
    elif isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, RequestDataTooBig):
        # Past Django's own cap the body is refused before our parser reads it.
        exc = RequestTooLarge()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied(str(exc) or None)
    elif is_statement_timeout(exc):
        exc = StatementTimedOut()

    response = drf_exception_handler(exc, context)
    if response is None:
        return None

    if isinstance(exc, exceptions.ValidationError):
        body: dict[str, Any] = {
            "code": "invalid",
            "message": "The request is invalid.",
            "fields": _flatten(exc.detail),
        }
    elif isinstance(exc, exceptions.APIException):
        codes = exc.get_codes()
        body = {
            "code": codes if isinstance(codes, str) else "error",
            "message": str(exc.detail),
        }
    else:  # pragma: no cover - DRF only handles APIException subclasses
        body = {"code": "error", "message": str(exc)}
    response.data = {"error": body}
    return response
