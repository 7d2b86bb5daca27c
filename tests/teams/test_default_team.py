"""Each user's default team is theirs to choose: being invited or added never moves it."""

from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from apps.teams.models import Membership, Role
from apps.teams.services import membership_remove
from tests.builders.api import token_client
from tests.builders.configuration import PASSWORD, add_member, make_pipeline, make_team, make_user
from tests.conftest import TeamWorld, client_for
from tests.teams.invitations import invite, link

PIPELINES = "/api/v1/pipelines/"


def default_slug(user) -> str | None:
    m = Membership.objects.filter(user=user, is_default=True).select_related("team").first()
    return m.team.slug if m else None


def pipeline_names(client) -> tuple[int, list[str]]:
    response = client.get(PIPELINES)
    body = response.json()
    return response.status_code, [p["name"] for p in body.get("results", [])]


def sign_in(username: str) -> Client:
    client = Client()
    response = client.post(reverse("login"), {"username": username, "password": PASSWORD})
    assert response.status_code == 302
    return client


@pytest.fixture
def pipelines(world: TeamWorld) -> None:
    make_pipeline(world.team, "acme-chat", name="Acme chat")
    make_pipeline(world.other_team, "globex-chat", name="Globex chat")


def test_the_first_team_a_user_creates_is_their_default(db: None) -> None:
    user = make_user("nina")
    make_team("first", owner=user)
    make_team("second", owner=user)
    assert default_slug(user) == "first"


def test_being_invited_leaves_the_victims_default_and_api_unchanged(
    world: TeamWorld, pipelines: None
) -> None:
    victim = token_client(world.outsider)
    assert pipeline_names(victim) == (200, ["Globex chat"])
    invite(world.team, "oscar@example.com", by=world.owner, role=Role.OWNER)
    assert pipeline_names(victim) == (200, ["Globex chat"])
    assert default_slug(world.outsider) == "globex"


def test_accepting_an_invitation_leaves_the_default_and_api_unchanged(
    world: TeamWorld, pipelines: None
) -> None:
    victim = token_client(world.outsider)
    _, raw = invite(world.team, "oscar@example.com", by=world.owner)
    assert client_for(world.outsider).post(link(raw)).status_code == 302
    assert Membership.objects.filter(team=world.team, user=world.outsider).exists()
    assert pipeline_names(victim) == (200, ["Globex chat"])
    assert default_slug(world.outsider) == "globex"


def test_an_operator_adding_a_user_leaves_their_default_unchanged(
    world: TeamWorld, pipelines: None
) -> None:
    victim = token_client(world.outsider)
    call_command("team", "add-member", "acme", "oscar", "--role", "viewer", stdout=StringIO())
    assert pipeline_names(victim) == (200, ["Globex chat"])
    assert default_slug(world.outsider) == "globex"


def test_a_member_of_one_team_without_a_default_keeps_it_when_joining_another(
    world: TeamWorld, pipelines: None
) -> None:
    # eddie was attached directly (as before defaults existed): one team, no default.
    assert default_slug(world.editor) is None
    editor = token_client(world.editor)
    assert pipeline_names(editor) == (200, ["Acme chat"])
    _, raw = invite(world.other_team, "eddie@example.com", by=world.outsider)
    client_for(world.editor).post(link(raw))
    assert pipeline_names(editor) == (200, ["Acme chat"])
    assert default_slug(world.editor) == "acme"


def test_a_user_without_teams_gets_the_accepted_one_as_default(world: TeamWorld) -> None:
    nina = make_user("nina")
    _, raw = invite(world.team, "nina@example.com", by=world.owner)
    client_for(nina).post(link(raw))
    assert default_slug(nina) == "acme"
    assert token_client(nina).get(PIPELINES, {"page_size": 1}).status_code == 200


def test_sign_in_lands_on_the_default_team_not_the_first_by_name(world: TeamWorld) -> None:
    # "Acme" sorts before "Globex": landing on the first team by name would be acme.
    add_member(world.team, world.outsider, Role.VIEWER)
    client = sign_in("oscar")
    home = client.get(reverse("home"))
    assert home["Location"] == reverse("dashboards:team_home", kwargs={"team_slug": "globex"})


def test_sign_in_lands_on_the_team_the_user_switched_to(world: TeamWorld) -> None:
    add_member(world.team, world.outsider, Role.VIEWER)
    client_for(world.outsider).post("/teams/acme/")
    client = sign_in("oscar")
    home = client.get(reverse("home"))
    assert home["Location"] == reverse("dashboards:team_home", kwargs={"team_slug": "acme"})


def test_the_api_follows_the_users_own_switch(world: TeamWorld, pipelines: None) -> None:
    add_member(world.team, world.outsider, Role.VIEWER)
    client_for(world.outsider).post("/teams/acme/")
    assert pipeline_names(token_client(world.outsider)) == (200, ["Acme chat"])


def test_leaving_the_default_team_falls_back_to_the_only_team_left(
    world: TeamWorld, pipelines: None
) -> None:
    add_member(world.team, world.outsider, Role.VIEWER)
    client_for(world.outsider).post("/teams/acme/")
    membership_remove(membership=Membership.objects.get(team=world.team, user=world.outsider))
    assert default_slug(world.outsider) is None
    assert pipeline_names(token_client(world.outsider)) == (200, ["Globex chat"])
