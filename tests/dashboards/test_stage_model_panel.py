"""A stage's page tells how its answers streamed and which models served it."""

import re

import pytest

from apps.pipelines.services import stage_update
from tests.builders.configuration import make_stage
from tests.builders.ingested_traces import ingest_and_roll_up
from tests.builders.streamed_traffic import streamed_traffic, streaming_pipeline
from tests.conftest import TeamWorld, client_for

pytestmark = pytest.mark.django_db
URL = "/teams/acme/dashboards/streamed/stages/generation/?window=1h"


@pytest.fixture
def streamed(world: TeamWorld) -> None:
    pipeline = streaming_pipeline(world.team)
    stage_update(
        stage=pipeline.stages.get(slug="generation"),
        stream_budget={"max_chunk_gap": {"p95": 300}},
    )
    ingest_and_roll_up(world.team, streamed_traffic(150, seed=6, ago_s=(1200, 60)).spans)


def panel(html: str) -> str:
    return html.split('id="model-answer"')[1].split("</section>")[0]


@pytest.mark.parametrize("who", ["owner", "viewer"])
def test_members_see_the_streaming_figures_and_the_models(
    world: TeamWorld, streamed: None, who: str
) -> None:
    response = client_for(getattr(world, who)).get(URL)
    assert response.status_code == 200
    shown = panel(response.content.decode())
    for words in (
        "Time per output token",
        "Output tokens per second",
        "Longest gap between chunks",
    ):
        assert words in shown
    assert re.search(r'data-model="large".*?vllm', shown, re.S)
    assert 'data-model="small"' in shown
    # The gap has a budget: its stalls are counted, the others say they have none.
    assert re.search(r'data-role="stalls">\d+ stream stalls? \(', shown)
    assert "Share of requests by model" in shown


def test_another_team_gets_404(world: TeamWorld, streamed: None) -> None:
    assert client_for(world.outsider).get(URL).status_code == 404


def test_a_stage_without_llm_calls_shows_no_panel(world: TeamWorld, streamed: None) -> None:
    make_stage(world.team.pipelines.get(slug="streamed"), "plain")
    html = client_for(world.owner).get(URL.replace("generation", "plain")).content.decode()
    assert 'id="model-answer"' not in html
