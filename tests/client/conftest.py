"""The client's tests need no database: none asks for ``db`` or the ``django_db`` mark."""

from collections.abc import Iterator

import pytest

from tests.client.support import Spans


@pytest.fixture
def spans() -> Iterator[Spans]:
    """The real OpenTelemetry SDK, its spans kept in memory; give ``spans.provider`` to
    ``Budgets``."""
    recorder = Spans()
    yield recorder
    recorder.provider.shutdown()
