import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core.cache import cache
from django.core.management import call_command
from django.test import Client

from apps.ingest.span_store.clickhouse_client import clickhouse, clickhouse_config
from apps.teams.models import Role, Team
from tests.browser_support import page  # noqa: F401 - the Chromium page fixture
from tests.builders.api import ApiWorld, api_world
from tests.builders.configuration import add_member, make_team, make_user


@dataclass
class TeamWorld:
    """One team with an owner, an editor and a viewer, and an outsider in another team."""

    team: Team
    owner: User
    editor: User
    viewer: User
    outsider: User
    other_team: Team


def team_world(suffix: str = "") -> TeamWorld:
    """The users and teams of ``world``; ``suffix`` on every name keeps a second world
    apart from each test's own (one built once for a module's tests, say)."""
    owner = make_user(f"olivia{suffix}")
    editor = make_user(f"eddie{suffix}")
    viewer = make_user(f"vera{suffix}")
    outsider = make_user(f"oscar{suffix}")
    team = make_team(f"acme{suffix}", owner=owner)
    add_member(team, editor, Role.EDITOR)
    add_member(team, viewer, Role.VIEWER)
    other_team = make_team(f"globex{suffix}", owner=outsider)
    return TeamWorld(team, owner, editor, viewer, outsider, other_team)


@pytest.fixture
def world(db: None) -> TeamWorld:
    return team_world()


@pytest.fixture
def api(world: TeamWorld) -> ApiWorld:
    """``world`` with a configured pipeline in acme and one of the same slug in globex."""
    return api_world(world)


def client_for(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture(scope="session", autouse=True)
def _no_cache_of_earlier_runs() -> None:
    """Ids start again in each run's new database: what an earlier run kept in the
    shared cache under the same ids (allowances, cached figures) must not leak in."""
    cache.clear()


@pytest.fixture
def clean_cache() -> Iterator[None]:
    """Rate windows, once-per-period claims and cached figures live in the cache: each
    test that depends on them starts, and leaves, without any."""
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def allowance_clock(monkeypatch: pytest.MonkeyPatch) -> float:
    """Allowances count in fixed windows of the clock (apps.core.counters): pinned to the
    start of an hour, so that no window of a minute, a quarter or an hour ends while a
    test spends one."""
    start = (time.time() // 3600) * 3600 + 1
    monkeypatch.setattr("apps.core.counters.time", SimpleNamespace(time=lambda: start))
    return start


# --- The span store the run keeps spans in -------------------------------------------
# `pytest --span-store=clickhouse` runs the tests on the ClickHouse cluster named by
# SPAN_STORE_TEST_URL (`make test-cluster` starts one and sets both); tests that look at
# PostgreSQL's span table itself are marked `postgres_spans` and left out there.


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--span-store",
        choices=("postgresql", "clickhouse"),
        default="postgresql",
        help="where the run keeps spans (clickhouse: the cluster at SPAN_STORE_TEST_URL)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "postgres_spans: reads PostgreSQL's span table itself (not on ClickHouse)"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--span-store") != "clickhouse":
        return
    skip = pytest.mark.skip(reason="reads PostgreSQL's span table itself")
    for item in items:
        if "postgres_spans" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def clickhouse_url(django_db_setup: None, django_db_blocker: Any) -> str:
    """The cluster at SPAN_STORE_TEST_URL, its database made anew for this run: ids
    (teams, batches) start again with each run's PostgreSQL database, and must not meet
    an earlier run's spans. As on a deployment, ``span_store_migrate`` then drops the
    trace rows' search index, which the cluster's search sets replace."""
    url = os.environ.get("SPAN_STORE_TEST_URL", "")
    if not url:
        pytest.skip("no ClickHouse cluster: `make test-cluster` starts one")
    config = clickhouse_config(url)
    with clickhouse(config) as client:
        client.execute(f"DROP DATABASE IF EXISTS {config.database}{config.on_cluster}")
    before = settings.SPAN_STORE_URL
    settings.SPAN_STORE_URL = url
    try:
        with django_db_blocker.unblock():
            call_command("span_store_migrate", verbosity=0)
    finally:
        settings.SPAN_STORE_URL = before
    return url


@pytest.fixture(scope="session", autouse=True)
def _span_store_of_the_run(request: pytest.FixtureRequest) -> Iterator[None]:
    """On `--span-store=clickhouse`, every process of the run keeps spans on the cluster:
    this one through the setting, the workers and servers it starts through the
    environment they inherit."""
    if request.config.getoption("--span-store") != "clickhouse":
        yield
        return
    if not os.environ.get("SPAN_STORE_TEST_URL"):
        raise pytest.UsageError("--span-store=clickhouse needs SPAN_STORE_TEST_URL")
    url = request.getfixturevalue("clickhouse_url")
    settings.SPAN_STORE_URL = url
    os.environ["SPAN_STORE_URL"] = url
    yield
    os.environ.pop("SPAN_STORE_URL", None)
