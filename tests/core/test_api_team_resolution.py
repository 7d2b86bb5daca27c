import pytest

from apps.pipelines.models import Pipeline
from apps.teams.models import Membership, Role
from tests.builders.api import ApiWorld, db_state, error_of, token_client
from tests.builders.configuration import add_member, make_user

LIST = "/api/v1/pipelines/"
NEW = {"slug": "agent", "name": "Agent", "budget": {"p95": 8000}}


def slugs(response) -> list[str]:
    return [item["name"] for item in response.json()["results"]]


def test_a_member_of_one_team_needs_not_name_it(api: ApiWorld):
    response = token_client(api.world.viewer).get(LIST)
    assert response.status_code == 200
    assert slugs(response) == ["RAG chat answer"]


def test_the_same_slug_reaches_each_callers_own_team(api: ApiWorld):
    mine = token_client(api.world.owner).get(LIST + "rag-chat/").json()
    theirs = token_client(api.world.outsider).get(LIST + "rag-chat/").json()
    assert mine["name"] == "RAG chat answer"
    assert theirs["name"] == "Globex chat"


@pytest.fixture
def multi(api: ApiWorld):
    """Olivia also belongs to globex, as a viewer."""
    add_member(api.world.other_team, api.world.owner, Role.VIEWER)
    return token_client(api.world.owner)


@pytest.fixture
def no_default(api: ApiWorld, multi):
    """Olivia in both teams with no default team chosen (as before defaults existed)."""
    Membership.objects.filter(user=api.world.owner).update(is_default=False)
    return multi


def test_a_member_of_several_teams_works_in_their_default_team(api: ApiWorld, multi):
    assert slugs(multi.get(LIST)) == ["RAG chat answer"]


def test_a_member_of_several_teams_without_a_default_must_name_one(api: ApiWorld, no_default):
    response = no_default.get(LIST)
    assert response.status_code == 400
    assert error_of(response)["code"] == "team_required"


def test_a_write_without_a_team_is_refused_and_writes_nothing(api: ApiWorld, no_default):
    before = db_state()
    response = no_default.post(LIST, NEW, format="json")
    assert response.status_code == 400
    assert error_of(response)["code"] == "team_required"
    assert db_state() == before


def test_a_user_in_no_team_must_name_one(db):
    response = token_client(make_user("nobody")).get(LIST)
    assert response.status_code == 400
    assert error_of(response)["code"] == "team_required"


def test_the_team_query_parameter_selects_the_team(api: ApiWorld, multi):
    assert slugs(multi.get(LIST, {"team": "globex"})) == ["Globex chat"]
    assert slugs(multi.get(LIST, {"team": "acme"})) == ["RAG chat answer"]


def test_the_x_team_header_selects_the_team(api: ApiWorld, multi):
    assert slugs(multi.get(LIST, HTTP_X_TEAM="globex")) == ["Globex chat"]


def test_the_query_parameter_wins_over_the_header(api: ApiWorld, multi):
    assert slugs(multi.get(LIST + "?team=acme", HTTP_X_TEAM="globex")) == ["RAG chat answer"]


def test_the_role_is_the_one_held_in_the_named_team(api: ApiWorld, multi):
    assert multi.post(LIST + "?team=acme", NEW, format="json").status_code == 201
    response = multi.post(LIST + "?team=globex", NEW, format="json")
    assert response.status_code == 403
    assert list(Pipeline.objects.filter(slug="agent").values_list("team__slug", flat=True)) == [
        "acme"
    ]


@pytest.mark.parametrize("team", ["globex", "no-such-team"])
def test_a_team_the_user_is_not_in_gets_404(api: ApiWorld, team: str):
    before = db_state()
    client = token_client(api.world.editor)
    assert client.get(LIST, {"team": team}).status_code == 404
    response = client.post(f"{LIST}?team={team}", NEW, format="json")
    assert response.status_code == 404
    assert error_of(response)["code"] == "not_found"
    assert db_state() == before


def test_another_teams_stage_slug_is_404(api: ApiWorld):
    api.other_stage.slug = "only-in-globex"
    api.other_stage.save()
    response = token_client(api.world.owner).get(LIST + "rag-chat/stages/only-in-globex/")
    assert response.status_code == 404


def test_another_teams_rule_id_is_404_for_read_and_write(api: ApiWorld):
    client = token_client(api.world.owner)
    url = f"{LIST}rag-chat/stages/retrieval/rules/{api.other_rule.pk}/"
    before = db_state()
    assert client.get(url).status_code == 404
    assert client.patch(url, {"service": "x"}, format="json").status_code == 404
    assert client.delete(url).status_code == 404
    assert db_state() == before


def test_a_rule_id_of_another_stage_of_the_same_pipeline_is_404(api: ApiWorld):
    url = f"{LIST}rag-chat/stages/generation/rules/{api.rule.pk}/"
    assert token_client(api.world.owner).get(url).status_code == 404
