"""`manage.py team invite` asks by e-mail; `add-member` is the operator's direct attach."""

from io import StringIO
from urllib.parse import urlsplit

import pytest
from django.core import mail
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.teams.management.commands.team import Command
from apps.teams.models import Invitation, Membership, Role
from tests.builders.configuration import make_user, verify_email
from tests.conftest import TeamWorld, client_for
from tests.teams.invitations import role_in, tokens_mailed_to


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_invite_mails_a_link_prints_it_last_and_attaches_nothing(world: TeamWorld) -> None:
    nina = make_user("nina")
    out = run("team", "invite", "acme", "nina@example.com", "--role", "editor")
    [raw] = tokens_mailed_to("nina@example.com")
    last = out.strip().splitlines()[-1]
    assert last.endswith(f"/accounts/invitations/{raw}/")
    assert role_in(world.team, nina) is None
    assert client_for(nina).post(urlsplit(last).path).status_code == 302
    assert role_in(world.team, nina) == Role.EDITOR


def test_invite_names_the_inviter_when_asked(world: TeamWorld) -> None:
    verify_email(world.owner)
    run("team", "invite", "acme", "nina@example.com", "--role", "viewer", "--invited-by", "olivia")
    assert Invitation.objects.get().invited_by == world.owner
    assert "olivia invited you" in mail.outbox[0].subject


def test_invite_from_an_unknown_inviter_fails_clearly(world: TeamWorld) -> None:
    with pytest.raises(CommandError, match="No user with the username “ghost”"):
        run("team", "invite", "acme", "n@example.com", "--role", "viewer", "--invited-by", "ghost")
    assert not Invitation.objects.exists()


@pytest.mark.parametrize("email", ["not-an-address", "x" * 300 + "@example.com"])
def test_invite_with_a_bad_address_fails_clearly(world: TeamWorld, email: str) -> None:
    with pytest.raises(CommandError, match=r"e-mail address|at most 254"):
        run("team", "invite", "acme", email, "--role", "viewer")
    assert not mail.outbox


def test_invite_to_an_unknown_team_fails_clearly(db: None) -> None:
    with pytest.raises(CommandError, match="No team with the slug “nope”"):
        run("team", "invite", "nope", "n@example.com", "--role", "viewer")


def test_the_operator_is_not_held_to_the_hourly_allowance(world: TeamWorld, settings) -> None:
    settings.INVITATION_SENDS_PER_HOUR = 1
    for n in range(3):
        run("team", "invite", "acme", f"n{n}@example.com", "--role", "viewer")
    assert Invitation.objects.count() == 3


def test_add_member_says_it_is_an_operators_direct_action(world: TeamWorld) -> None:
    parser = Command().create_parser("manage.py", "team")
    text = parser.format_help()
    assert "without" in text
    assert "consent" in text
    run("team", "add-member", "acme", "oscar", "--role", "viewer")
    assert Membership.objects.filter(team=world.team, user=world.outsider).exists()
