import pytest

from tests.builders.ingested_traces import Explorer, build_explorer
from tests.conftest import TeamWorld


@pytest.fixture
def explorer(world: TeamWorld) -> Explorer:
    return build_explorer(world)
