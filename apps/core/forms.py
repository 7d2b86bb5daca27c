"""What every app's forms share."""

from collections.abc import Mapping

from django import forms
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError


def add_service_error(
    form: forms.Form, error: ValidationError, renames: Mapping[str, str] | None = None
) -> None:
    """A service's ValidationError on the form: on the field it names (``renames`` maps a
    model field to the form's), else above the form."""
    if not hasattr(error, "error_dict"):
        form.add_error(None, error)
        return
    for field, messages in error.error_dict.items():
        name = (renames or {}).get(field, field)
        target = name if name in form.fields and name != NON_FIELD_ERRORS else None
        form.add_error(target, messages)
