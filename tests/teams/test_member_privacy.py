"""Other members' e-mail addresses are for owners only, on the page and in the API."""

import pytest

from apps.teams.models import Membership, Role
from tests.builders.api import token_client
from tests.builders.configuration import add_member, make_user
from tests.conftest import TeamWorld, client_for
from tests.teams.conftest import HTMX

URL = "/teams/acme/members/"
ADDRESSES = ("olivia@example.com", "eddie@example.com", "vera@example.com")


def test_owners_see_every_members_address(world: TeamWorld) -> None:
    body = client_for(world.owner).get(URL).content.decode()
    assert "<th>Email</th>" in body
    for address in ADDRESSES:
        assert address in body


@pytest.mark.parametrize("role", ["editor", "viewer"])
def test_editors_and_viewers_see_usernames_and_no_addresses(world: TeamWorld, role: str) -> None:
    body = client_for(getattr(world, role)).get(URL).content.decode()
    for name in ("olivia", "eddie", "vera"):
        assert name in body
    assert "<th>Email</th>" not in body
    for address in ADDRESSES:
        assert address not in body


def test_the_swapped_member_table_of_a_demoted_owner_shows_no_addresses(
    world: TeamWorld,
) -> None:
    add_member(world.team, make_user("otto"), Role.OWNER)
    mine = Membership.objects.get(team=world.team, user=world.owner)
    response = client_for(world.owner).post(
        f"/teams/acme/members/{mine.pk}/role/", {"role": "viewer"}, headers=HTMX
    )
    body = response.content.decode()
    assert body.lstrip().startswith('<div id="member-table">')
    for address in ADDRESSES:
        assert address not in body


@pytest.mark.parametrize("role", ["owner", "editor", "viewer"])
def test_the_api_shows_no_other_members_addresses(world: TeamWorld, role: str) -> None:
    user = getattr(world, role)
    client = token_client(user)
    for path in ("/api/v1/me/", "/api/v1/teams/"):
        text = client.get(path).content.decode()
        for address in ADDRESSES:
            if address != user.email:
                assert address not in text
