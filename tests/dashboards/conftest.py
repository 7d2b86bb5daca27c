import pytest

from tests.conftest import TeamWorld
from tests.dashboards.builders import Explorer, build_explorer


@pytest.fixture
def explorer(world: TeamWorld) -> Explorer:
    return build_explorer(world)
