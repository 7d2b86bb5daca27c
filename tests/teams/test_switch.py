import pytest
from django.test import Client
from django.urls import reverse

from tests.conftest import TeamWorld, client_for
from tests.factories import make_team
from tests.teams.conftest import assert_redirects_to_login

URL = "/teams/acme/"


@pytest.mark.parametrize("role", ["owner", "editor", "viewer"])
def test_member_switches_team_and_it_is_remembered(world: TeamWorld, role: str) -> None:
    client = client_for(getattr(world, role))
    response = client.get(URL)
    assert response.status_code == 302
    assert response["Location"] == reverse("dashboards:team_home", kwargs={"team_slug": "acme"})
    assert client.session["current_team"] == "acme"


def test_outsider_gets_404_and_the_session_is_untouched(world: TeamWorld) -> None:
    client = client_for(world.outsider)
    client.get("/teams/globex/")
    response = client.get(URL)
    assert response.status_code == 404
    assert client.session["current_team"] == "globex"


def test_unknown_team_gets_404(world: TeamWorld) -> None:
    assert client_for(world.owner).get("/teams/no-such-team/").status_code == 404


def test_anonymous_is_sent_to_login(world: TeamWorld) -> None:
    assert_redirects_to_login(Client().get(URL), URL)


def test_switch_refuses_post(world: TeamWorld) -> None:
    assert client_for(world.owner).post(URL).status_code == 405


def test_home_then_follows_the_remembered_team(world: TeamWorld) -> None:
    client = client_for(world.owner)
    make_team("zeta", owner=world.owner)
    client.get("/teams/zeta/")
    response = client.get("/")
    assert response["Location"] == reverse("dashboards:team_home", kwargs={"team_slug": "zeta"})
