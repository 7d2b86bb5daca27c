from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.teams.models import ApiToken, Membership, Role, Team
from apps.teams.services import api_token_authenticate
from apps.teams.tokens import token_digest
from tests.builders.configuration import make_user
from tests.conftest import TeamWorld

User = get_user_model()


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


# --- team create -------------------------------------------------------------------


def test_team_create_makes_a_team_without_members(db: None) -> None:
    out = run("team", "create", "initech", "--name", "Initech Corp")
    team = Team.objects.get(slug="initech")
    assert team.name == "Initech Corp"
    assert not team.memberships.exists()
    assert "initech" in out


def test_team_create_defaults_the_name_to_the_slug(db: None) -> None:
    run("team", "create", "initech")
    assert Team.objects.get(slug="initech").name == "initech"


def test_team_create_on_an_existing_slug_says_it_exists(world: TeamWorld) -> None:
    with pytest.raises(CommandError, match="already exists"):
        run("team", "create", "acme", "--name", "Other")
    assert Team.objects.get(slug="acme").name == "Acme"


@pytest.mark.parametrize("slug", ["Bad Slug", "under_score", "x" * 51, "tokens"])
def test_team_create_rejects_a_bad_slug(db: None, slug: str) -> None:
    with pytest.raises(CommandError, match=f"Cannot create team “{slug}”: "):
        run("team", "create", slug)
    assert not Team.objects.exists()


def test_team_without_action_is_a_usage_error(db: None) -> None:
    with pytest.raises(CommandError, match="required"):
        run("team")


# --- team add-member ------------------------------------------------------------------


def test_add_member_adds_an_existing_user_with_the_role(world: TeamWorld) -> None:
    out = run("team", "add-member", "acme", "oscar", "--role", "editor")
    assert Membership.objects.get(team=world.team, user=world.outsider).role == Role.EDITOR
    assert "oscar" in out


def test_add_member_finds_a_user_by_email(world: TeamWorld) -> None:
    run("team", "add-member", "acme", "oscar@example.com", "--role", "viewer")
    assert Membership.objects.get(team=world.team, user=world.outsider).role == Role.VIEWER


def test_add_member_to_an_unknown_team_fails_clearly(world: TeamWorld) -> None:
    with pytest.raises(CommandError, match="No team with the slug “nope”"):
        run("team", "add-member", "nope", "oscar", "--role", "editor")


def test_add_member_with_an_unknown_user_fails_clearly(world: TeamWorld) -> None:
    with pytest.raises(CommandError, match="ghost"):
        run("team", "add-member", "acme", "ghost", "--role", "editor")
    assert world.team.memberships.count() == 3


def test_add_member_twice_fails_clearly(world: TeamWorld) -> None:
    with pytest.raises(CommandError, match="already a member"):
        run("team", "add-member", "acme", "vera", "--role", "owner")
    assert Membership.objects.get(team=world.team, user=world.viewer).role == Role.VIEWER


def test_add_member_with_a_bad_role_fails_clearly(world: TeamWorld) -> None:
    with pytest.raises(CommandError, match="invalid choice: 'boss'"):
        run("team", "add-member", "acme", "oscar", "--role", "boss")
    assert not Membership.objects.filter(team=world.team, user=world.outsider).exists()


def test_add_member_requires_a_role(world: TeamWorld) -> None:
    with pytest.raises(CommandError, match="--role"):
        run("team", "add-member", "acme", "oscar")


def test_add_member_can_create_the_user_without_a_usable_password(world: TeamWorld) -> None:
    out = run(
        "team", "add-member", "acme", "nina", "--role", "viewer",
        "--create-user", "--email", "nina@example.com",
    )  # fmt: skip
    nina = User.objects.get(username="nina")
    assert nina.email == "nina@example.com"
    assert not nina.has_usable_password()
    assert Membership.objects.get(team=world.team, user=nina).role == Role.VIEWER
    assert "manage.py changepassword nina" in out


def test_create_user_for_an_existing_username_fails_and_adds_nobody(world: TeamWorld) -> None:
    with pytest.raises(CommandError, match="taken"):
        run("team", "add-member", "acme", "oscar", "--role", "viewer", "--create-user")
    assert not Membership.objects.filter(team=world.team, user=world.outsider).exists()


def test_create_user_with_a_bad_email_creates_nobody(world: TeamWorld) -> None:
    with pytest.raises(CommandError, match="email"):
        run(
            "team", "add-member", "acme", "nina", "--role", "viewer",
            "--create-user", "--email", "not-an-email",
        )  # fmt: skip
    assert not User.objects.filter(username="nina").exists()


def test_create_user_on_an_unknown_team_creates_nobody(db: None) -> None:
    with pytest.raises(CommandError, match="No team"):
        run("team", "add-member", "nope", "nina", "--role", "viewer", "--create-user")
    assert not User.objects.filter(username="nina").exists()


def test_email_without_create_user_is_refused(world: TeamWorld) -> None:
    with pytest.raises(CommandError, match="--create-user"):
        run("team", "add-member", "acme", "oscar", "--role", "viewer", "--email", "o@example.com")


# --- api_token create ---------------------------------------------------------------------


def test_api_token_create_prints_the_token_alone_on_the_last_line(db: None) -> None:
    user = make_user("olivia")
    out = run("api_token", "create", "--user", "olivia", "--name", "deploy")
    raw = out.strip().splitlines()[-1]
    token = ApiToken.objects.get(user=user)
    assert token.name == "deploy"
    assert token.digest == token_digest(raw)
    assert raw not in token.digest
    authenticated = api_token_authenticate(raw=raw)
    assert authenticated is not None
    assert authenticated.user == user


def test_api_token_create_for_an_unknown_user_fails_clearly(db: None) -> None:
    with pytest.raises(CommandError, match="No user with the username “ghost”"):
        run("api_token", "create", "--user", "ghost")
    assert not ApiToken.objects.exists()


def test_api_token_create_for_an_inactive_user_fails(db: None) -> None:
    make_user("gone", is_active=False)
    with pytest.raises(CommandError, match="inactive"):
        run("api_token", "create", "--user", "gone")
    assert not ApiToken.objects.exists()


def test_api_token_create_requires_a_user(db: None) -> None:
    with pytest.raises(CommandError, match="--user"):
        run("api_token", "create")
