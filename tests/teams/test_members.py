import pytest
from django.test import Client
from django.urls import reverse

from apps.teams.models import Membership, Role
from tests.builders.configuration import add_member, make_user
from tests.conftest import TeamWorld, client_for
from tests.teams.conftest import HTMX, assert_redirects_to_login

URL = "/teams/acme/members/"
MEMBERS = reverse("teams:members", kwargs={"team_slug": "acme"})


def role_of(world: TeamWorld, user) -> str | None:
    m = Membership.objects.filter(team=world.team, user=user).first()
    return m.role if m else None


def membership_id(world: TeamWorld, user) -> int:
    return Membership.objects.get(team=world.team, user=user).pk


def role_url(pk: int) -> str:
    return f"/teams/acme/members/{pk}/role/"


def remove_url(pk: int) -> str:
    return f"/teams/acme/members/{pk}/remove/"


# --- Listing -------------------------------------------------------------------


@pytest.mark.parametrize("role", ["owner", "editor", "viewer"])
def test_any_member_sees_all_members_with_roles(world: TeamWorld, role: str) -> None:
    response = client_for(getattr(world, role)).get(URL)
    assert response.status_code == 200
    body = response.content.decode()
    for name in ("olivia", "eddie", "vera"):
        assert name in body
    assert "oscar" not in body
    assert response.context["team"] == world.team


def test_owner_sees_the_invite_form_and_role_controls(world: TeamWorld) -> None:
    body = client_for(world.owner).get(URL).content.decode()
    assert 'name="email"' in body
    assert 'name="role"' in body
    assert "hx-post" in body


@pytest.mark.parametrize("role", ["editor", "viewer"])
def test_non_owners_see_no_owner_controls(world: TeamWorld, role: str) -> None:
    body = client_for(getattr(world, role)).get(URL).content.decode()
    assert 'name="email"' not in body
    assert "/remove/" not in body
    assert "/role/" not in body
    assert reverse("teams:leave", kwargs={"team_slug": "acme"}) in body


def test_outsider_gets_404_on_the_members_page(world: TeamWorld) -> None:
    assert client_for(world.outsider).get(URL).status_code == 404


def test_anonymous_is_sent_to_login_from_the_members_page(world: TeamWorld) -> None:
    assert_redirects_to_login(Client().get(URL), URL)


# --- Inviting (the add form) --------------------------------------------------------
# Invitations themselves are tested in test_invitations.py.


@pytest.mark.parametrize("role", ["editor", "viewer"])
def test_non_owner_gets_403_when_inviting(world: TeamWorld, role: str) -> None:
    response = client_for(getattr(world, role)).post(
        URL, {"email": "oscar@example.com", "role": "owner"}
    )
    assert response.status_code == 403
    assert role_of(world, world.outsider) is None


def test_outsider_gets_404_when_inviting(world: TeamWorld) -> None:
    response = client_for(world.outsider).post(URL, {"email": "oscar@example.com", "role": "owner"})
    assert response.status_code == 404
    assert role_of(world, world.outsider) is None


def test_anonymous_invite_is_sent_to_login(world: TeamWorld) -> None:
    response = Client().post(URL, {"email": "oscar@example.com", "role": "owner"})
    assert_redirects_to_login(response, URL)
    assert role_of(world, world.outsider) is None


# --- Changing roles ----------------------------------------------------------------


def test_owner_changes_a_role_without_javascript(world: TeamWorld) -> None:
    client = client_for(world.owner)
    response = client.post(role_url(membership_id(world, world.editor)), {"role": "viewer"})
    assert response.status_code == 302
    assert response["Location"] == MEMBERS
    assert role_of(world, world.editor) == Role.VIEWER


def test_owner_changes_a_role_with_htmx_and_gets_the_table(world: TeamWorld) -> None:
    response = client_for(world.owner).post(
        role_url(membership_id(world, world.viewer)), {"role": "owner"}, headers=HTMX
    )
    assert response.status_code == 200
    body = response.content.decode()
    assert body.lstrip().startswith('<div id="member-table">')
    assert "<html" not in body
    assert role_of(world, world.viewer) == Role.OWNER


def test_last_owner_cannot_be_demoted(world: TeamWorld) -> None:
    client = client_for(world.owner)
    response = client.post(role_url(membership_id(world, world.owner)), {"role": "editor"})
    assert response.status_code == 302
    assert role_of(world, world.owner) == Role.OWNER
    page = client.get(response["Location"]).content.decode()
    assert "at least one owner" in page


def test_last_owner_demotion_error_shows_in_the_htmx_table(world: TeamWorld) -> None:
    response = client_for(world.owner).post(
        role_url(membership_id(world, world.owner)), {"role": "viewer"}, headers=HTMX
    )
    assert response.status_code == 200
    assert "at least one owner" in response.content.decode()
    assert role_of(world, world.owner) == Role.OWNER


def test_an_owner_may_step_down_when_another_owner_remains(world: TeamWorld) -> None:
    add_member(world.team, make_user("otto"), Role.OWNER)
    response = client_for(world.owner).post(
        role_url(membership_id(world, world.owner)), {"role": "editor"}, headers=HTMX
    )
    assert role_of(world, world.owner) == Role.EDITOR
    # The table now renders without owner controls for the demoted user.
    assert "/role/" not in response.content.decode()


@pytest.mark.parametrize("value", ["admin", "", "o" * 500])
def test_bad_role_value_changes_nothing(world: TeamWorld, value: str) -> None:
    response = client_for(world.owner).post(
        role_url(membership_id(world, world.editor)), {"role": value}, headers=HTMX
    )
    assert response.status_code == 200
    assert "Choose a role" in response.content.decode()
    assert role_of(world, world.editor) == Role.EDITOR


@pytest.mark.parametrize("role", ["editor", "viewer"])
def test_non_owner_gets_403_when_changing_a_role(world: TeamWorld, role: str) -> None:
    user = getattr(world, role)
    response = client_for(user).post(role_url(membership_id(world, user)), {"role": "owner"})
    assert response.status_code == 403
    assert role_of(world, user) == role


def test_outsider_gets_404_when_changing_a_role(world: TeamWorld) -> None:
    pk = membership_id(world, world.viewer)
    response = client_for(world.outsider).post(role_url(pk), {"role": "owner"})
    assert response.status_code == 404
    assert role_of(world, world.viewer) == Role.VIEWER


def test_owner_cannot_reach_another_teams_membership(world: TeamWorld) -> None:
    foreign = Membership.objects.get(team=world.other_team, user=world.outsider)
    response = client_for(world.owner).post(role_url(foreign.pk), {"role": "viewer"})
    assert response.status_code == 404
    foreign.refresh_from_db()
    assert foreign.role == Role.OWNER


def test_anonymous_role_change_is_sent_to_login(world: TeamWorld) -> None:
    url = role_url(membership_id(world, world.viewer))
    assert_redirects_to_login(Client().post(url, {"role": "owner"}), url)
    assert role_of(world, world.viewer) == Role.VIEWER


def test_role_change_refuses_get(world: TeamWorld) -> None:
    url = role_url(membership_id(world, world.viewer))
    assert client_for(world.owner).get(url).status_code == 405


# --- Removing -------------------------------------------------------------------------


def test_owner_removes_a_member_without_javascript(world: TeamWorld) -> None:
    response = client_for(world.owner).post(remove_url(membership_id(world, world.viewer)))
    assert response.status_code == 302
    assert response["Location"] == MEMBERS
    assert role_of(world, world.viewer) is None


def test_owner_removes_a_member_with_htmx_and_gets_the_table(world: TeamWorld) -> None:
    response = client_for(world.owner).post(
        remove_url(membership_id(world, world.editor)), headers=HTMX
    )
    assert response.status_code == 200
    body = response.content.decode()
    assert body.lstrip().startswith('<div id="member-table">')
    assert "eddie" not in body
    assert role_of(world, world.editor) is None


def test_last_owner_cannot_remove_themselves(world: TeamWorld) -> None:
    response = client_for(world.owner).post(
        remove_url(membership_id(world, world.owner)), headers=HTMX
    )
    assert response.status_code == 200
    assert "last owner" in response.content.decode()
    assert role_of(world, world.owner) == Role.OWNER


def test_owner_removing_themselves_with_another_owner_leaves_the_team(world: TeamWorld) -> None:
    add_member(world.team, make_user("otto"), Role.OWNER)
    response = client_for(world.owner).post(
        remove_url(membership_id(world, world.owner)), headers=HTMX
    )
    assert response.status_code == 200
    assert response["HX-Redirect"] == reverse("home")
    assert role_of(world, world.owner) is None


@pytest.mark.parametrize("role", ["editor", "viewer"])
def test_non_owner_gets_403_when_removing(world: TeamWorld, role: str) -> None:
    response = client_for(getattr(world, role)).post(remove_url(membership_id(world, world.owner)))
    assert response.status_code == 403
    assert role_of(world, world.owner) == Role.OWNER


def test_outsider_gets_404_when_removing(world: TeamWorld) -> None:
    response = client_for(world.outsider).post(remove_url(membership_id(world, world.viewer)))
    assert response.status_code == 404
    assert role_of(world, world.viewer) == Role.VIEWER


def test_owner_cannot_remove_another_teams_member(world: TeamWorld) -> None:
    foreign = Membership.objects.get(team=world.other_team, user=world.outsider)
    response = client_for(world.owner).post(remove_url(foreign.pk))
    assert response.status_code == 404
    assert Membership.objects.filter(pk=foreign.pk).exists()


def test_anonymous_remove_is_sent_to_login(world: TeamWorld) -> None:
    url = remove_url(membership_id(world, world.viewer))
    assert_redirects_to_login(Client().post(url), url)
    assert role_of(world, world.viewer) == Role.VIEWER


# --- Leaving --------------------------------------------------------------------------

LEAVE = "/teams/acme/members/leave/"


@pytest.mark.parametrize("role", ["editor", "viewer"])
def test_member_leaves_the_team_and_forgets_it(world: TeamWorld, role: str) -> None:
    user = getattr(world, role)
    client = client_for(user)
    client.post("/teams/acme/")
    response = client.post(LEAVE)
    assert response.status_code == 302
    assert response["Location"] == reverse("home")
    assert role_of(world, user) is None
    assert "current_team" not in client.session


def test_last_owner_cannot_leave_and_is_told_why(world: TeamWorld) -> None:
    client = client_for(world.owner)
    response = client.post(LEAVE, follow=True)
    assert response.redirect_chain[-1][0] == MEMBERS
    assert "last owner cannot leave" in response.content.decode()
    assert role_of(world, world.owner) == Role.OWNER


def test_owner_leaves_when_another_owner_remains(world: TeamWorld) -> None:
    add_member(world.team, make_user("otto"), Role.OWNER)
    response = client_for(world.owner).post(LEAVE)
    assert response["Location"] == reverse("home")
    assert role_of(world, world.owner) is None


def test_outsider_gets_404_when_leaving(world: TeamWorld) -> None:
    assert client_for(world.outsider).post(LEAVE).status_code == 404
    assert Membership.objects.filter(team=world.other_team, user=world.outsider).exists()


def test_anonymous_leave_is_sent_to_login(world: TeamWorld) -> None:
    assert_redirects_to_login(Client().post(LEAVE), LEAVE)


def test_leave_refuses_get(world: TeamWorld) -> None:
    assert client_for(world.editor).get(LEAVE).status_code == 405
    assert role_of(world, world.editor) == Role.EDITOR
