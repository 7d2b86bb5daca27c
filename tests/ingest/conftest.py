import pytest

from tests.conftest import TeamWorld
from tests.ingest.endpoint_helpers import ingest_token


@pytest.fixture
def token(world: TeamWorld) -> str:
    return ingest_token(world.team)
