from rest_framework.test import APIClient

from apps.teams.models import Role
from tests.builders.api import ApiWorld, error_of, token_client
from tests.builders.configuration import add_member, make_team


def test_teams_lists_the_users_teams_with_their_role(api: ApiWorld):
    add_member(api.world.other_team, api.world.viewer, Role.EDITOR)
    body = token_client(api.world.viewer).get("/api/v1/teams/").json()
    assert body["count"] == 2
    assert body["results"] == [
        {"slug": "acme", "name": "Acme", "role": "viewer"},
        {"slug": "globex", "name": "Globex", "role": "editor"},
    ]


def test_teams_never_shows_teams_the_user_is_not_in(api: ApiWorld):
    body = token_client(api.world.outsider).get("/api/v1/teams/").json()
    assert [t["slug"] for t in body["results"]] == ["globex"]


def test_teams_pages(api: ApiWorld):
    for slug in ("t-a", "t-b", "t-c"):
        make_team(slug, owner=api.world.owner)
    body = token_client(api.world.owner).get("/api/v1/teams/", {"page_size": 3}).json()
    assert body["count"] == 4
    assert len(body["results"]) == 3
    assert body["next"]


def test_me_shows_the_user_and_their_teams(api: ApiWorld):
    body = token_client(api.world.editor).get("/api/v1/me/").json()
    assert body == {
        "username": "eddie",
        "email": "eddie@example.com",
        "teams": [{"slug": "acme", "name": "Acme", "role": "editor"}],
    }


def test_me_and_teams_need_authentication(db):
    for path in ("/api/v1/me/", "/api/v1/teams/"):
        response = APIClient().get(path)
        assert response.status_code == 401
        assert error_of(response)["code"] == "not_authenticated"


def test_me_works_with_a_session(api: ApiWorld):
    client = APIClient()
    client.force_login(api.world.owner)
    assert client.get("/api/v1/me/").json()["username"] == "olivia"
