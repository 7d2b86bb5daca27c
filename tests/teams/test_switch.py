import pytest
from django.test import Client
from django.urls import reverse

from apps.teams.models import Membership
from tests.builders.configuration import make_team
from tests.conftest import TeamWorld, client_for
from tests.teams.conftest import assert_redirects_to_login

URL = "/teams/acme/"


def default_slug(user) -> str | None:
    m = Membership.objects.filter(user=user, is_default=True).select_related("team").first()
    return m.team.slug if m else None


@pytest.mark.parametrize("role", ["owner", "editor", "viewer"])
def test_member_switches_team_by_post_and_it_is_remembered(world: TeamWorld, role: str) -> None:
    client = client_for(getattr(world, role))
    response = client.post(URL)
    assert response.status_code == 302
    assert response["Location"] == reverse("dashboards:team_home", kwargs={"team_slug": "acme"})
    assert client.session["current_team"] == "acme"


def test_switching_makes_the_team_the_users_default(world: TeamWorld) -> None:
    make_team("zeta", owner=world.owner)
    assert default_slug(world.owner) == "acme"
    client_for(world.owner).post("/teams/zeta/")
    assert default_slug(world.owner) == "zeta"
    assert Membership.objects.filter(user=world.owner, is_default=True).count() == 1


def test_switch_by_get_is_refused_and_changes_nothing(world: TeamWorld) -> None:
    make_team("zeta", owner=world.owner)
    client = client_for(world.owner)
    response = client.get("/teams/zeta/")
    assert response.status_code == 405
    assert default_slug(world.owner) == "acme"
    assert "current_team" not in client.session


def test_switch_without_a_csrf_token_is_refused(world: TeamWorld) -> None:
    make_team("zeta", owner=world.owner)
    client = Client(enforce_csrf_checks=True)
    client.force_login(world.owner)
    assert client.post("/teams/zeta/").status_code == 403
    assert default_slug(world.owner) == "acme"


def test_outsider_gets_404_and_nothing_changes(world: TeamWorld) -> None:
    client = client_for(world.outsider)
    client.post("/teams/globex/")
    response = client.post(URL)
    assert response.status_code == 404
    assert client.session["current_team"] == "globex"
    assert default_slug(world.outsider) == "globex"


def test_unknown_team_gets_404(world: TeamWorld) -> None:
    assert client_for(world.owner).post("/teams/no-such-team/").status_code == 404


def test_anonymous_is_sent_to_login(world: TeamWorld) -> None:
    assert_redirects_to_login(Client().post(URL), URL)


def test_home_then_follows_the_remembered_team(world: TeamWorld) -> None:
    client = client_for(world.owner)
    make_team("zeta", owner=world.owner)
    client.post("/teams/zeta/")
    response = client.get("/")
    assert response["Location"] == reverse("dashboards:team_home", kwargs={"team_slug": "zeta"})


def test_the_nav_switcher_posts_a_csrf_protected_form(world: TeamWorld) -> None:
    make_team("zeta", owner=world.owner)
    body = client_for(world.owner).get("/teams/acme/members/").content.decode()
    assert '<form class="inline" method="post" action="/teams/zeta/"' in body
    assert 'href="/teams/zeta/"' not in body
    switcher = body[body.index('action="/teams/zeta/"') :]
    assert 'name="csrfmiddlewaretoken"' in switcher[: switcher.index("</form>")]
