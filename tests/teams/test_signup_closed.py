"""ALLOW_SIGNUP: open sign-up can be closed; an invitation's link still opens it for its invitee."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from apps.teams.models import Invitation, Role
from tests.conftest import TeamWorld, client_for
from tests.teams.invitations import invite, link, role_in

User = get_user_model()
SIGNUP = "/accounts/signup/"
NEW_PASSWORD = "a-much-longer-passphrase-42"


def form(username: str = "nina", email: str = "nina@example.com", **extra: str) -> dict:
    return {
        "username": username,
        "email": email,
        "password1": NEW_PASSWORD,
        "password2": NEW_PASSWORD,
        **extra,
    }


@pytest.fixture
def closed(settings) -> None:
    settings.ALLOW_SIGNUP = False


def test_closed_sign_up_answers_404_with_a_clear_page(db: None, closed: None) -> None:
    response = Client().get(SIGNUP)
    assert response.status_code == 404
    assert "Sign-up is closed" in response.content.decode()


def test_closed_sign_up_creates_nobody(db: None, closed: None) -> None:
    response = Client().post(SIGNUP, form())
    assert response.status_code == 404
    assert not User.objects.exists()


def test_the_login_page_hides_the_sign_up_link_when_closed(db: None, closed: None) -> None:
    body = Client().get(reverse("login")).content.decode()
    assert reverse("signup") not in body
    assert "by invitation" in body


def test_the_login_page_links_to_sign_up_when_open(db: None) -> None:
    assert reverse("signup") in Client().get(reverse("login")).content.decode()


@pytest.mark.parametrize("allow", [True, False])
def test_an_invitee_signs_up_from_the_link_then_accepts(
    world: TeamWorld, settings, allow: bool
) -> None:
    settings.ALLOW_SIGNUP = allow
    _, raw = invite(world.team, "nina@example.com", by=world.owner, role=Role.EDITOR)
    client = Client()
    page = client.get(f"{SIGNUP}?invitation={raw}")
    assert page.status_code == 200
    body = page.content.decode()
    assert "You were invited to join <strong>Acme</strong>" in body
    assert 'value="nina@example.com"' in body
    response = client.post(SIGNUP, form(invitation=raw))
    assert response.status_code == 302
    assert response["Location"] == link(raw)
    nina = User.objects.get(username="nina")
    # Signing up is not accepting: the invitee still says yes on the invitation page.
    assert role_in(world.team, nina) is None
    assert client.post(link(raw)).status_code == 302
    assert role_in(world.team, nina) == Role.EDITOR


def test_the_invitee_may_sign_up_with_another_address(world: TeamWorld, closed: None) -> None:
    _, raw = invite(world.team, "nina@example.com", by=world.owner)
    response = Client().post(SIGNUP, form(email="nina@elsewhere.example", invitation=raw))
    assert response.status_code == 302
    assert User.objects.get(username="nina").email == "nina@elsewhere.example"


@pytest.mark.parametrize("state", ["revoked", "expired", "accepted", "bogus"])
def test_a_dead_invitation_does_not_open_closed_sign_up(
    world: TeamWorld, closed: None, state: str
) -> None:
    invitation, raw = invite(world.team, "nina@example.com", by=world.owner)
    now = timezone.now()
    if state == "revoked":
        Invitation.objects.filter(pk=invitation.pk).update(revoked_at=now)
    elif state == "expired":
        Invitation.objects.filter(pk=invitation.pk).update(expires_at=now)
    elif state == "accepted":
        client_for(world.outsider).post(link(raw))
    else:
        raw = "x" * 10_000
    assert Client().get(f"{SIGNUP}?invitation={raw}").status_code == 404
    assert Client().post(SIGNUP, form(invitation=raw)).status_code == 404
    assert not User.objects.filter(username="nina").exists()


def test_a_signed_in_user_following_a_sign_up_link_goes_to_the_invitation(
    world: TeamWorld,
) -> None:
    _, raw = invite(world.team, "oscar@example.com", by=world.owner)
    response = client_for(world.outsider).get(f"{SIGNUP}?invitation={raw}")
    assert response["Location"] == link(raw)


@pytest.mark.parametrize("token", ["a/b", "x" * 10_000, "nope"])
def test_a_signed_in_user_with_a_bad_sign_up_link_goes_home(world: TeamWorld, token: str) -> None:
    response = client_for(world.outsider).get(SIGNUP, {"invitation": token})
    assert response.status_code == 302
    assert response["Location"] == reverse("home")
