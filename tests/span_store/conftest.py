"""The ClickHouse span store's tests run against a real cluster: ``make test-cluster``
starts one on this machine (2 shards x 2 replicas and a ZooKeeper) and names it in
``SPAN_STORE_TEST_URL``. Without it they are skipped, and say so (``clickhouse_url``)."""

from collections.abc import Iterator

import pytest
from django.test import override_settings


@pytest.fixture
def on_clickhouse(clickhouse_url: str) -> Iterator[str]:
    """The test's spans go to the cluster."""
    with override_settings(SPAN_STORE_URL=clickhouse_url):
        yield clickhouse_url


@pytest.fixture
def on_postgresql() -> Iterator[None]:
    """The test's spans go to PostgreSQL, whatever store the run uses."""
    with override_settings(SPAN_STORE_URL=""):
        yield
