"""A team holds a bounded number of live ingest tokens: minting more gains nothing anyway."""

import pytest
from django.core.exceptions import ValidationError

from apps.teams.models import IngestToken
from apps.teams.services import ingest_token_create, ingest_token_revoke
from tests.conftest import TeamWorld, client_for


def test_a_team_at_its_token_cap_cannot_create_another(world: TeamWorld, settings) -> None:
    settings.INGEST_TOKENS_PER_TEAM = 2
    for name in ("a", "b"):
        ingest_token_create(team=world.team, name=name, created_by=None)

    with pytest.raises(ValidationError, match="most it may have"):
        ingest_token_create(team=world.team, name="c", created_by=None)
    assert IngestToken.objects.filter(team=world.team).count() == 2


def test_revoking_a_token_makes_room(world: TeamWorld, settings) -> None:
    settings.INGEST_TOKENS_PER_TEAM = 1
    token, _ = ingest_token_create(team=world.team, name="a", created_by=None)
    ingest_token_revoke(token=token)

    ingest_token_create(team=world.team, name="b", created_by=None)

    assert IngestToken.objects.filter(team=world.team, revoked_at__isnull=True).count() == 1


def test_one_team_at_its_cap_leaves_another_free(world: TeamWorld, settings) -> None:
    settings.INGEST_TOKENS_PER_TEAM = 1
    ingest_token_create(team=world.team, name="a", created_by=None)

    ingest_token_create(team=world.other_team, name="a", created_by=None)

    assert IngestToken.objects.filter(team=world.other_team).count() == 1


def test_the_page_tells_an_editor_the_cap_is_reached(world: TeamWorld, settings) -> None:
    settings.INGEST_TOKENS_PER_TEAM = 1
    ingest_token_create(team=world.team, name="a", created_by=None)

    response = client_for(world.editor).post(
        f"/teams/{world.team.slug}/ingest-tokens/", {"name": "another"}
    )

    assert response.status_code == 200
    assert "most it may have" in response.content.decode()
    assert IngestToken.objects.filter(team=world.team).count() == 1
