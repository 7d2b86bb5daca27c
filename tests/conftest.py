import time
from collections.abc import Iterator
from dataclasses import dataclass
from types import SimpleNamespace

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.test import Client

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
