"""Pipelines are counted per account: one account's teams share its cap."""

import pytest

from apps.pipelines.config_as_code import ConfigApplyError, config_apply, parse_document
from apps.pipelines.models import Pipeline
from tests.builders.api import token_client
from tests.builders.configuration import make_pipeline, make_team
from tests.conftest import TeamWorld, client_for

CAP = 3


@pytest.fixture(autouse=True)
def _small_cap(settings) -> None:
    settings.ACCOUNT_MAX_PIPELINES = CAP


def test_ten_teams_of_one_account_share_its_pipeline_cap(world: TeamWorld) -> None:
    teams = [world.team] + [make_team(f"acme-{n}", owner=world.owner) for n in range(9)]
    for team in teams[:CAP]:
        make_pipeline(team, "chat")

    # The fourth, on a team that has none yet, through each door.
    api = token_client(world.owner).post(
        f"/api/v1/pipelines/?team={teams[5].slug}",
        {"slug": "agent", "name": "Agent", "budget": {"p95": 4000}},
        format="json",
    )
    page = client_for(world.owner).post(
        f"/teams/{teams[6].slug}/pipelines/new/",
        {"slug": "agent", "name": "Agent", "preset": "blank", "budget_p95_ms": "4000"},
    )
    yaml = f"team: {teams[7].slug}\npipelines:\n  - {{slug: a, name: A, budget: {{p95: 1}}}}\n"
    with pytest.raises(ConfigApplyError, match="ACCOUNT_MAX_PIPELINES=3"):
        config_apply(document=parse_document(yaml))

    assert api.status_code == 400
    assert "ACCOUNT_MAX_PIPELINES=3" in str(api.json())
    assert page.status_code == 422
    assert "ACCOUNT_MAX_PIPELINES=3" in page.content.decode()
    assert Pipeline.objects.filter(team__account=world.owner).count() == CAP


def test_an_editor_s_pipeline_counts_against_the_team_s_account_not_the_editor_s(
    world: TeamWorld,
) -> None:
    for n in range(CAP):
        make_pipeline(world.team, f"p{n}")

    refused = token_client(world.editor).post(
        "/api/v1/pipelines/?team=acme",
        {"slug": "more", "name": "More", "budget": {"p95": 1}},
        format="json",
    )
    # The outsider's account is untouched by acme's pipelines.
    served = token_client(world.outsider).post(
        "/api/v1/pipelines/", {"slug": "more", "name": "More", "budget": {"p95": 1}}, format="json"
    )

    assert refused.status_code == 400
    assert served.status_code == 201
