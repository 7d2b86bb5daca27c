"""The stage models API: streaming figures and the split by model, with access per team."""

from typing import Any

import pytest
from rest_framework.test import APIClient

from apps.core.percentiles import QUANTILES
from apps.rollups.selectors.windows import to_datetime
from tests.builders.api import error_of, session_client, token_client
from tests.builders.bucket_rows import nearest_rank
from tests.builders.configuration import make_stage
from tests.builders.ingested_traces import ingest_and_roll_up
from tests.builders.streamed_traffic import Sent, streamed_traffic, streaming_pipeline
from tests.conftest import TeamWorld
from tests.timing import MS

pytestmark = pytest.mark.django_db
URL = "/api/v1/pipelines/streamed/stages/generation/models"


@pytest.fixture
def sent(world: TeamWorld) -> Sent:
    streaming_pipeline(world.team)
    streaming_pipeline(world.other_team)  # the same slugs in another team, with its own traffic
    sent = streamed_traffic(120, seed=3)
    ingest_and_roll_up(world.team, sent.spans)
    ingest_and_roll_up(world.other_team, streamed_traffic(30, seed=4).spans)
    return sent


def window(sent: Sent) -> dict[str, str]:
    return {
        "from": to_datetime(sent.start_s).isoformat(),
        "to": to_datetime(sent.end_s).isoformat(),
    }


def get(client: APIClient, query: dict[str, Any], url: str = URL) -> dict[str, Any]:
    response = client.get(url, query)
    assert response.status_code == 200, response.content
    return response.json()


@pytest.mark.parametrize("who", ["owner", "editor", "viewer"])
def test_members_read_the_figures_of_their_teams_traffic(
    world: TeamWorld, sent: Sent, who: str
) -> None:
    body = get(token_client(getattr(world, who)), window(sent))
    assert (body["pipeline"], body["stage"]) == ("streamed", "generation")
    gaps = body["streaming"]["max_chunk_gap"]
    assert gaps["count"] == 120
    exact = nearest_rank([row[4] / MS for row in sent.rows], QUANTILES["p95"])
    assert abs(gaps["p95"] - exact) <= 0.01 * exact + 0.05
    models = {row["model"]: row for row in body["models"]}
    assert set(models) == {row[0] for row in sent.rows}
    assert sum(row["share"] for row in body["models"]) == pytest.approx(1)
    for name, row in models.items():
        assert row["provider"] == "vllm"
        assert row["wall"]["count"] == sum(1 for r in sent.rows if r[0] == name)
        assert row["streaming"]["time_per_output_token"]["count"] == row["wall"]["count"]
    points = body["shares"]["points"]
    assert sum(point["count"] for point in points) == 120
    for point in points:
        if point["count"]:
            assert sum(point["shares"].values()) == pytest.approx(1)


def test_the_browser_session_reads_it_too(world: TeamWorld, sent: Sent) -> None:
    body = get(session_client(world.viewer), window(sent))
    assert body["streaming"]["output_tokens_per_s"]["count"] == 120


def test_another_teams_user_gets_404_and_no_figures(world: TeamWorld, sent: Sent) -> None:
    response = token_client(world.outsider).get(URL, window(sent))
    # The outsider's own team has a pipeline of the same slug: they see theirs, not ours.
    assert response.status_code == 200
    assert response.json()["streaming"]["max_chunk_gap"]["count"] == 30


def test_unknown_stage_and_pipeline_are_404(world: TeamWorld, sent: Sent) -> None:
    client = token_client(world.owner)
    for url in (URL.replace("generation", "nope"), URL.replace("streamed", "nope")):
        assert client.get(url, window(sent)).status_code == 404


def test_anonymous_is_refused(sent: Sent) -> None:
    assert APIClient().get(URL, window(sent)).status_code in (401, 403)


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"window": "7y"}, "window"),
        ({"from": "yesterday"}, "from"),
        ({"from": "2030-01-02T00:00:00Z", "to": "2030-01-01T00:00:00Z"}, "to"),
    ],
)
def test_a_malformed_window_is_a_400_naming_the_field(
    world: TeamWorld, sent: Sent, query: dict[str, str], field: str
) -> None:
    response = token_client(world.owner).get(URL, query)
    assert response.status_code == 400
    assert field in str(error_of(response))


def test_a_stage_without_llm_calls_answers_empty_figures(world: TeamWorld, sent: Sent) -> None:
    make_stage(world.team.pipelines.get(slug="streamed"), "plain")
    body = get(token_client(world.owner), window(sent), URL.replace("generation", "plain"))
    assert body["models"] == []
    assert body["streaming"] == {
        "time_per_output_token": None, "output_tokens_per_s": None, "max_chunk_gap": None,
    }  # fmt: skip
