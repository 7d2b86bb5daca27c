"""An account's teams hold a bounded number of live ingest tokens: minting more gains nothing."""

import pytest
from django.core.exceptions import ValidationError

from apps.teams.models import IngestToken, Team
from apps.teams.services import ingest_token_create, ingest_token_revoke
from tests.builders.configuration import make_team, make_user
from tests.conftest import TeamWorld, client_for


def test_an_account_at_its_token_cap_cannot_create_another(world: TeamWorld, settings) -> None:
    settings.INGEST_TOKENS_PER_ACCOUNT = 2
    for name in ("a", "b"):
        ingest_token_create(team=world.team, name=name, created_by=None)

    with pytest.raises(ValidationError, match="most one account may hold"):
        ingest_token_create(team=world.team, name="c", created_by=None)
    assert IngestToken.objects.filter(team=world.team).count() == 2


def test_revoking_a_token_makes_room(world: TeamWorld, settings) -> None:
    settings.INGEST_TOKENS_PER_ACCOUNT = 1
    token, _ = ingest_token_create(team=world.team, name="a", created_by=None)
    ingest_token_revoke(token=token)

    ingest_token_create(team=world.team, name="b", created_by=None)

    assert IngestToken.objects.filter(team=world.team, revoked_at__isnull=True).count() == 1


def test_one_account_at_its_cap_leaves_another_free(world: TeamWorld, settings) -> None:
    settings.INGEST_TOKENS_PER_ACCOUNT = 1
    ingest_token_create(team=world.team, name="a", created_by=None)

    ingest_token_create(team=world.other_team, name="a", created_by=None)

    assert IngestToken.objects.filter(team=world.other_team).count() == 1


def test_the_page_tells_an_editor_the_cap_is_reached(world: TeamWorld, settings) -> None:
    settings.INGEST_TOKENS_PER_ACCOUNT = 1
    ingest_token_create(team=world.team, name="a", created_by=None)

    response = client_for(world.editor).post(
        f"/teams/{world.team.slug}/ingest-tokens/", {"name": "another"}
    )

    assert response.status_code == 200
    assert "most one account may hold" in response.content.decode()
    assert IngestToken.objects.filter(team=world.team).count() == 1


def _teams_of_one_account(world: TeamWorld) -> list[Team]:
    return [world.team] + [make_team(f"acme-{i}", owner=world.owner) for i in range(2, 11)]


def test_ten_teams_of_one_account_share_its_token_cap(world: TeamWorld, settings) -> None:
    settings.INGEST_TOKENS_PER_ACCOUNT = 9
    *nine, tenth = _teams_of_one_account(world)
    for team in nine:
        ingest_token_create(team=team, name="collector", created_by=world.owner)

    with pytest.raises(ValidationError, match=r"INGEST_TOKENS_PER_ACCOUNT=9"):
        ingest_token_create(team=tenth, name="collector", created_by=world.owner)
    assert not IngestToken.objects.filter(team=tenth).exists()


def test_ten_accounts_hold_a_token_each_within_the_same_cap(db: None, settings) -> None:
    settings.INGEST_TOKENS_PER_ACCOUNT = 9
    teams = [make_team(f"solo-{i}", owner=make_user(f"solo{i}")) for i in range(1, 11)]

    for team in teams:
        ingest_token_create(team=team, name="collector", created_by=None)

    assert IngestToken.objects.count() == 10


def test_a_team_made_by_an_operator_is_an_account_of_its_own(world: TeamWorld, settings) -> None:
    settings.INGEST_TOKENS_PER_ACCOUNT = 1
    server_made = make_team("ops")  # no owner: manage.py team create
    ingest_token_create(team=world.team, name="collector", created_by=None)

    ingest_token_create(team=server_made, name="collector", created_by=None)

    assert IngestToken.objects.filter(team=server_made).count() == 1
