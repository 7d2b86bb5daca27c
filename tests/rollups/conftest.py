from collections.abc import Iterator

import pytest

from budgets_site.celery import app


@pytest.fixture
def eager() -> Iterator[None]:
    """Tasks sent by the code under test run in this process, errors raised here."""
    saved = (app.conf.task_always_eager, app.conf.task_eager_propagates)
    app.conf.task_always_eager = app.conf.task_eager_propagates = True
    yield
    app.conf.task_always_eager, app.conf.task_eager_propagates = saved
