"""Errors of the services as the REST API answers them."""

from collections.abc import Iterator
from contextlib import contextmanager

from rest_framework import exceptions

from apps.teams.ratelimit import RateExceeded


@contextmanager
def rates_as_429() -> Iterator[None]:
    """A spent allowance (``RateExceeded``) answers 429 with ``Retry-After``, not 400."""
    try:
        yield
    except RateExceeded as exc:
        raise exceptions.Throttled(wait=exc.retry_after_s, detail=" ".join(exc.messages)) from exc
