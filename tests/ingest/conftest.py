from collections.abc import Iterator

import pytest

from tests.conftest import TeamWorld
from tests.ingest.endpoint_helpers import fresh_cache, ingest_token


@pytest.fixture
def clean_cache() -> Iterator[None]:
    """Rate-limit windows and the cached backlog must not leak between endpoint tests."""
    fresh_cache()
    yield
    fresh_cache()


@pytest.fixture
def token(world: TeamWorld) -> str:
    return ingest_token(world.team)
