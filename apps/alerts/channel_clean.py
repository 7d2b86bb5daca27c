"""A channel's own values, checked in one place for every door.

The form, the API and the configuration file read their input shape (a text of
addresses, a JSON list, a YAML sequence) and call ``channel_clean``, which returns
the values as stored or raises one ValidationError by field. A wrong address carries
its position (``index``) so that the file can name its line. Whether a webhook's host
is one the server may call is the services' to say (``webhook_url_clean``): it
resolves names.
"""

from collections.abc import Mapping, Sequence
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import URLValidator, validate_email

from apps.alerts.models import Channel, WebhookFormat
from apps.alerts.transports.signing import secret_is_valid

URL_SCHEMES = ("http", "https")
_url_validator = URLValidator(schemes=list(URL_SCHEMES))


def _addresses(value: Any) -> list[str]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ValidationError("Give a list of e-mail addresses.", code="invalid")
    # Blanks dropped and the same address twice made one recipient, then counted before
    # any is parsed: a list far too long costs no more than one of the right length.
    given: dict[str, tuple[int, str]] = {}
    for index, address in enumerate(value):
        text = address.strip() if isinstance(address, str) else ""
        if text:
            given.setdefault(text.lower(), (index, text))
    if not given:
        raise ValidationError("Give at least one address.", code="required")
    if len(given) > Channel.MAX_ADDRESSES:
        raise ValidationError(
            f"{len(given)} addresses: a channel takes at most {Channel.MAX_ADDRESSES}.",
            code="too_many",
        )
    errors: list[ValidationError] = []
    for index, text in given.values():
        try:
            validate_email(text)
        except ValidationError:
            errors.append(
                ValidationError(
                    f"“{text}” is not an e-mail address.", code="address", params={"index": index}
                )
            )
    if errors:
        raise ValidationError(errors)
    return [text for _, text in given.values()]


def _url(value: Any) -> str:
    text = value.strip() if isinstance(value, str) else ""
    try:
        _url_validator(text)
    except ValidationError:
        raise ValidationError(
            f"“{text}” is not an http:// or https:// URL.", code="invalid"
        ) from None
    return text


def _secret(value: Any) -> str:
    text = value.strip() if isinstance(value, str) else ""
    if text and not secret_is_valid(text):
        raise ValidationError(
            "A signing secret is “whsec_” followed by base64 (at least 24 bytes).", code="invalid"
        )
    return text


def _format(value: Any) -> str:
    if value not in WebhookFormat.values:
        raise ValidationError(
            f"Must be one of {', '.join(WebhookFormat.values)}.", code="invalid_choice"
        )
    return str(value)


_FIELDS = {"email_to": _addresses, "url": _url, "secret": _secret, "format": _format}


def channel_clean(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` (any of ``email_to``, ``url``, ``secret``, ``format``) as stored, or
    ValidationError by field."""
    cleaned: dict[str, Any] = {}
    errors: dict[str, list[ValidationError]] = {}
    for name, value in values.items():
        try:
            cleaned[name] = _FIELDS[name](value)
        except ValidationError as exc:
            errors[name] = exc.error_list
    if errors:
        raise ValidationError(errors)
    return cleaned
