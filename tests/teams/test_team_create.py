import pytest
from django.test import Client
from django.urls import reverse

from apps.teams.models import Membership, Role, Team
from apps.teams.services import team_create
from tests.builders.configuration import make_user
from tests.conftest import TeamWorld, client_for
from tests.teams.conftest import assert_redirects_to_login

URL = "/teams/new/"


def test_anonymous_is_sent_to_login(db: None) -> None:
    assert_redirects_to_login(Client().get(URL), URL)
    assert_redirects_to_login(Client().post(URL, {"slug": "x"}), URL)
    assert not Team.objects.filter(slug="x").exists()


def test_form_page_renders(db: None) -> None:
    response = client_for(make_user()).get(URL)
    assert response.status_code == 200
    assert 'name="slug"' in response.content.decode()


@pytest.mark.parametrize("role", ["owner", "editor", "viewer", "outsider"])
def test_any_signed_in_user_creates_a_team_and_becomes_its_owner(
    world: TeamWorld, role: str
) -> None:
    user = getattr(world, role)
    client = client_for(user)
    response = client.post(URL, {"slug": "initech", "name": "Initech"})
    assert response.status_code == 302
    assert response["Location"] == reverse("pipelines:list", kwargs={"team_slug": "initech"})
    team = Team.objects.get(slug="initech")
    assert team.name == "Initech"
    assert Membership.objects.get(team=team).user == user
    assert Membership.objects.get(team=team).role == Role.OWNER
    assert client.session["current_team"] == "initech"


def test_name_defaults_to_the_slug_and_slug_is_lowercased(db: None) -> None:
    client_for(make_user()).post(URL, {"slug": " Hooli-Labs ", "name": ""})
    assert Team.objects.get(slug="hooli-labs").name == "hooli-labs"


def test_taken_slug_shows_an_inline_error(world: TeamWorld) -> None:
    response = client_for(world.viewer).post(URL, {"slug": "globex", "name": "Mine"})
    assert response.status_code == 200
    body = response.content.decode()
    assert 'class="errorlist' in body
    assert "already exists" in body
    assert Team.objects.get(slug="globex").name == "Globex"
    assert not Membership.objects.filter(team__slug="globex", user=world.viewer).exists()


@pytest.mark.parametrize(
    "slug",
    ["has space", "under_score", "-leading", "trailing-", "ümlaut", "x" * 51, "new", "tokens", ""],
)
def test_bad_slug_shows_an_inline_error_and_creates_nothing(db: None, slug: str) -> None:
    client = client_for(make_user())
    response = client.post(URL, {"slug": slug, "name": "Name"})
    assert response.status_code == 200
    assert 'class="errorlist' in response.content.decode()
    assert not Team.objects.exists()
    assert "current_team" not in client.session


def test_oversized_name_is_rejected(db: None) -> None:
    response = client_for(make_user()).post(URL, {"slug": "ok", "name": "n" * 101})
    assert response.status_code == 200
    assert not Team.objects.exists()


def test_a_new_team_draws_on_its_creators_account(world: TeamWorld) -> None:
    client_for(world.viewer).post(URL, {"slug": "initech", "name": "Initech"})
    assert Team.objects.get(slug="initech").account == world.viewer
    assert world.team.account == world.owner


def test_an_account_creates_at_most_its_cap_of_teams(db: None, settings) -> None:
    settings.ACCOUNT_MAX_TEAMS = 3
    user = make_user()
    client = client_for(user)
    for n in range(3):
        assert client.post(URL, {"slug": f"t{n}", "name": ""}).status_code == 302
    response = client.post(URL, {"slug": "t3", "name": ""})
    assert response.status_code == 200
    assert "ACCOUNT_MAX_TEAMS=3" in response.content.decode()
    assert not Team.objects.filter(slug="t3").exists()
    # Another account is not affected by this one's teams.
    assert client_for(make_user()).post(URL, {"slug": "t3", "name": ""}).status_code == 302


def test_a_team_made_on_the_server_has_no_account_and_counts_for_nobody(db: None) -> None:
    assert team_create(slug="ops", name="Ops").account is None
