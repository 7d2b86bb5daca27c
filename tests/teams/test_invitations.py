"""Owners invite by e-mail; nobody joins a team until they accept the link themselves."""

import smtplib
from datetime import timedelta
from typing import Any

import pytest
from django.core import mail
from django.core.exceptions import ValidationError
from django.core.mail import EmailMultiAlternatives
from django.core.mail.backends.base import BaseEmailBackend
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from apps.teams.models import Invitation, Membership, Role
from tests.builders.configuration import add_member, make_team, make_user, verify_email
from tests.conftest import TeamWorld, client_for
from tests.teams.conftest import HTMX, assert_redirects_to_login
from tests.teams.invitations import invite, link, role_in, tokens_mailed_to

URL = "/teams/acme/members/"
MEMBERS = reverse("teams:members", kwargs={"team_slug": "acme"})


def resend_url(invitation: Invitation) -> str:
    return f"/teams/{invitation.team.slug}/invitations/{invitation.pk}/resend/"


def revoke_url(invitation: Invitation) -> str:
    return f"/teams/{invitation.team.slug}/invitations/{invitation.pk}/revoke/"


def messages_of(response: Any) -> list[str]:
    return [str(m) for m in response.context["messages"]]


class FailingEmailBackend(BaseEmailBackend):
    def send_messages(self, email_messages: Any) -> int:
        raise smtplib.SMTPServerDisconnected("connection closed")


# --- Sending -------------------------------------------------------------------------


def test_owner_invites_by_email_and_the_link_is_mailed(world: TeamWorld) -> None:
    verify_email(world.owner)  # the team's names go into mail from verified accounts only
    response = client_for(world.owner).post(URL, {"email": "Nina@Example.com", "role": "editor"})
    assert response.status_code == 302
    assert response["Location"] == MEMBERS
    invitation = Invitation.objects.get(team=world.team)
    assert (invitation.email, invitation.role, invitation.invited_by) == (
        "Nina@example.com",
        Role.EDITOR,
        world.owner,
    )
    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert isinstance(message, EmailMultiAlternatives)
    assert message.to == ["Nina@example.com"]
    assert "olivia invited you to join Acme" in message.subject
    [raw] = tokens_mailed_to("Nina@example.com")
    assert link(raw) in str(message.alternatives[0][0])
    # Only the token's digest is stored.
    assert raw not in invitation.digest


def test_an_invitation_expires_after_the_configured_days(world: TeamWorld, settings) -> None:
    settings.INVITATION_EXPIRY_DAYS = 3
    invitation, _ = invite(world.team, "nina@example.com", by=world.owner)
    assert invitation.expires_at - invitation.sent_at == timedelta(days=3)


def test_inviting_an_existing_account_attaches_nothing(world: TeamWorld) -> None:
    nina = make_user("nina", email="nina@example.com")
    client_for(world.owner).post(URL, {"email": "nina@example.com", "role": "owner"})
    assert role_in(world.team, nina) is None
    assert Membership.objects.filter(team=world.team).count() == 3


def test_the_answer_is_the_same_whether_or_not_the_address_has_an_account(
    world: TeamWorld,
) -> None:
    make_user("nina", email="nina@example.com")
    client = client_for(world.owner)
    answers = []
    for address in ("nina@example.com", "nobody@example.com", "oscar@example.com"):
        response = client.post(URL, {"email": address, "role": "viewer"})
        page = client.get(response["Location"])
        answers.append(
            (
                response.status_code,
                response["Location"],
                [m.replace(address, "ADDRESS") for m in messages_of(page)],
            )
        )
    assert answers[0] == answers[1] == answers[2]
    assert answers[0][2] == ["Invitation sent to ADDRESS. They join once they accept it."]
    assert [m.to for m in mail.outbox] == [
        ["nina@example.com"],
        ["nobody@example.com"],
        ["oscar@example.com"],
    ]
    assert Membership.objects.filter(team=world.team).count() == 3


def test_pending_invitations_are_listed_to_owners_with_resend_and_revoke(
    world: TeamWorld,
) -> None:
    invitation, _ = invite(world.team, "nina@example.com", by=world.owner)
    body = client_for(world.owner).get(URL).content.decode()
    assert "Pending invitations" in body
    assert "nina@example.com" in body
    assert resend_url(invitation) in body
    assert revoke_url(invitation) in body


@pytest.mark.parametrize("role", ["editor", "viewer"])
def test_non_owners_do_not_see_invitations(world: TeamWorld, role: str) -> None:
    invitation, _ = invite(world.team, "nina@example.com", by=world.owner)
    body = client_for(getattr(world, role)).get(URL).content.decode()
    assert "nina@example.com" not in body
    assert resend_url(invitation) not in body


def test_inviting_a_current_member_is_refused_inline(world: TeamWorld) -> None:
    response = client_for(world.owner).post(URL, {"email": "VERA@example.com", "role": "owner"})
    assert response.status_code == 200
    assert "already a member" in response.content.decode()
    assert not Invitation.objects.exists()
    assert not mail.outbox


def test_inviting_the_same_address_twice_points_to_resend(world: TeamWorld) -> None:
    invite(world.team, "nina@example.com", by=world.owner)
    response = client_for(world.owner).post(URL, {"email": "NINA@example.com", "role": "editor"})
    assert response.status_code == 200
    assert "already invited" in response.content.decode()
    assert Invitation.objects.count() == 1
    assert len(mail.outbox) == 1


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"email": "n" * 10_000 + "@example.com", "role": "viewer"}, "at most 254 characters"),
        ({"email": "x" * 250 + "@example.com", "role": "viewer"}, "at most 254 characters"),
        ({"email": "not-an-address", "role": "viewer"}, "valid e-mail address"),
        ({"email": "nina@example.com\nBcc: x@example.com", "role": "viewer"}, "valid e-mail"),
        ({"email": "nina@example.com", "role": "admin"}, "Select a valid choice"),
        ({"email": "", "role": "viewer"}, "This field is required"),
        ({"role": "viewer"}, "This field is required"),
    ],
)
def test_malformed_invitations_get_a_clear_inline_error(
    world: TeamWorld, data: dict, message: str
) -> None:
    response = client_for(world.owner).post(URL, data)
    assert response.status_code == 200
    body = response.content.decode()
    assert 'class="errorlist' in body
    assert message in body
    assert not Invitation.objects.exists()
    assert not mail.outbox


def test_an_invitation_whose_email_fails_is_not_kept(world: TeamWorld, settings) -> None:
    settings.EMAIL_BACKEND = f"{__name__}.FailingEmailBackend"
    response = client_for(world.owner).post(URL, {"email": "nina@example.com", "role": "viewer"})
    assert response.status_code == 200
    assert "could not be sent" in response.content.decode()
    assert not Invitation.objects.exists()


def test_one_user_sends_a_limited_number_of_invitations_an_hour(world: TeamWorld, settings) -> None:
    settings.INVITATION_SENDS_PER_HOUR = 3
    client = client_for(world.owner)
    for n in range(3):
        assert client.post(URL, {"email": f"n{n}@example.com", "role": "viewer"}).status_code == 302
    response = client.post(URL, {"email": "n4@example.com", "role": "viewer"})
    assert response.status_code == 200
    assert "as many invitations as allowed in an hour" in response.content.decode()
    assert Invitation.objects.count() == 3
    assert len(mail.outbox) == 3


# --- Resending and revoking ------------------------------------------------------------


def _age(invitation: Invitation, **delta: int) -> None:
    Invitation.objects.filter(pk=invitation.pk).update(sent_at=timezone.now() - timedelta(**delta))


def test_owner_resends_and_only_the_new_link_works(world: TeamWorld) -> None:
    invitation, old = invite(world.team, "nina@example.com", by=world.owner)
    _age(invitation, minutes=10)
    response = client_for(world.owner).post(resend_url(invitation))
    assert response.status_code == 302
    assert response["Location"] == MEMBERS
    first, new = tokens_mailed_to("nina@example.com")
    assert first == old
    assert new != old
    nina = make_user("nina")
    assert client_for(nina).post(link(old)).status_code == 404
    assert client_for(nina).post(link(new)).status_code == 302
    assert role_in(world.team, nina) == Role.VIEWER


def test_resending_renews_the_expiry(world: TeamWorld) -> None:
    invitation, _ = invite(world.team, "nina@example.com", by=world.owner)
    Invitation.objects.filter(pk=invitation.pk).update(
        sent_at=timezone.now() - timedelta(days=8), expires_at=timezone.now() - timedelta(days=1)
    )
    client_for(world.owner).post(resend_url(invitation))
    invitation.refresh_from_db()
    assert invitation.expires_at > timezone.now() + timedelta(days=6)


def test_resending_is_rate_limited(world: TeamWorld) -> None:
    invitation, _ = invite(world.team, "nina@example.com", by=world.owner)
    client = client_for(world.owner)
    response = client.post(resend_url(invitation), headers=HTMX)
    assert response.status_code == 200
    body = response.content.decode()
    assert body.lstrip().startswith('<div id="invitation-table">')
    assert "wait before sending it again" in body
    assert len(mail.outbox) == 1


def test_owner_revokes_with_htmx_and_the_link_stops_working(world: TeamWorld) -> None:
    invitation, raw = invite(world.team, "nina@example.com", by=world.owner)
    response = client_for(world.owner).post(revoke_url(invitation), headers=HTMX)
    assert response.status_code == 200
    assert "nina@example.com" not in response.content.decode()
    invitation.refresh_from_db()
    assert invitation.revoked_at is not None
    nina = make_user("nina")
    response = client_for(nina).post(link(raw))
    assert response.status_code == 410
    assert "withdrawn" in response.content.decode()
    assert role_in(world.team, nina) is None


@pytest.mark.parametrize("action", [resend_url, revoke_url])
@pytest.mark.parametrize("role", ["editor", "viewer"])
def test_non_owner_gets_403_managing_invitations(world: TeamWorld, role: str, action) -> None:
    invitation, _ = invite(world.team, "nina@example.com", by=world.owner)
    _age(invitation, minutes=10)
    assert client_for(getattr(world, role)).post(action(invitation)).status_code == 403
    invitation.refresh_from_db()
    assert invitation.is_open
    assert len(mail.outbox) == 1


@pytest.mark.parametrize("action", [resend_url, revoke_url])
def test_outsider_gets_404_managing_invitations(world: TeamWorld, action) -> None:
    invitation, _ = invite(world.team, "nina@example.com", by=world.owner)
    _age(invitation, minutes=10)
    assert client_for(world.outsider).post(action(invitation)).status_code == 404
    invitation.refresh_from_db()
    assert invitation.is_open
    assert len(mail.outbox) == 1


@pytest.mark.parametrize("action", ["resend", "revoke"])
def test_an_owner_cannot_reach_another_teams_invitation(world: TeamWorld, action: str) -> None:
    theirs, _ = invite(world.other_team, "nina@example.com", by=world.outsider)
    _age(theirs, minutes=10)
    url = f"/teams/acme/invitations/{theirs.pk}/{action}/"
    assert client_for(world.owner).post(url).status_code == 404
    theirs.refresh_from_db()
    assert theirs.is_open
    assert len(mail.outbox) == 1


@pytest.mark.parametrize("action", [resend_url, revoke_url])
def test_managing_invitations_needs_sign_in_and_post(world: TeamWorld, action) -> None:
    invitation, _ = invite(world.team, "nina@example.com", by=world.owner)
    url = action(invitation)
    assert_redirects_to_login(Client().post(url), url)
    assert client_for(world.owner).get(url).status_code == 405


def test_an_accepted_invitation_cannot_be_resent_or_revoked(world: TeamWorld) -> None:
    invitation, raw = invite(world.team, "nina@example.com", by=world.owner)
    client_for(make_user("nina")).post(link(raw))
    client = client_for(world.owner)
    assert client.post(revoke_url(invitation)).status_code == 404
    assert client.post(resend_url(invitation)).status_code == 404


# --- Accepting -------------------------------------------------------------------------


def test_nothing_attaches_until_the_invitee_accepts_by_post(world: TeamWorld) -> None:
    nina = make_user("nina")
    _, raw = invite(world.team, "nina@example.com", by=world.owner, role=Role.EDITOR)
    client = client_for(nina)
    page = client.get(link(raw))
    assert page.status_code == 200
    body = page.content.decode()
    assert "olivia invited you to join the team <strong>Acme</strong> as editor" in body
    assert f'<form method="post" action="{link(raw)}">' in body
    assert role_in(world.team, nina) is None

    response = client.post(link(raw))
    assert response.status_code == 302
    assert response["Location"] == reverse("dashboards:team_home", kwargs={"team_slug": "acme"})
    assert role_in(world.team, nina) == Role.EDITOR
    invitation = Invitation.objects.get()
    assert invitation.accepted_by == nina
    assert invitation.accepted_at is not None


def test_any_signed_in_account_holding_the_link_may_accept(world: TeamWorld) -> None:
    """Holding the link is the proof: the address need not be the account's."""
    _, raw = invite(world.team, "nina@work.example", by=world.owner)
    nina = make_user("nina", email="nina@home.example")
    assert client_for(nina).post(link(raw)).status_code == 302
    assert role_in(world.team, nina) == Role.VIEWER


def test_accepting_twice_fails_clearly(world: TeamWorld) -> None:
    _, raw = invite(world.team, "nina@example.com", by=world.owner)
    nina, other = make_user("nina"), make_user("mallory")
    assert client_for(nina).post(link(raw)).status_code == 302
    for user in (nina, other):
        response = client_for(user).post(link(raw))
        assert response.status_code == 410
        assert "already accepted" in response.content.decode()
    assert role_in(world.team, other) is None
    assert Membership.objects.filter(team=world.team).count() == 4


def test_an_expired_invitation_cannot_be_accepted(world: TeamWorld) -> None:
    invitation, raw = invite(world.team, "nina@example.com", by=world.owner)
    Invitation.objects.filter(pk=invitation.pk).update(expires_at=timezone.now())
    nina = make_user("nina")
    client = client_for(nina)
    page = client.get(link(raw))
    assert page.status_code == 410
    assert "expired" in page.content.decode()
    response = client.post(link(raw))
    assert response.status_code == 410
    assert "expired" in response.content.decode()
    assert role_in(world.team, nina) is None


def test_a_revoked_invitation_cannot_be_accepted(world: TeamWorld) -> None:
    invitation, raw = invite(world.team, "nina@example.com", by=world.owner)
    Invitation.objects.filter(pk=invitation.pk).update(revoked_at=timezone.now())
    nina = make_user("nina")
    response = client_for(nina).post(link(raw))
    assert response.status_code == 410
    assert "withdrawn" in response.content.decode()
    assert role_in(world.team, nina) is None


@pytest.mark.parametrize("token", ["not-a-token", "x" * 10_000, "ü" * 40, "%00", "a" * 43])
def test_a_bad_token_gets_a_clear_404(world: TeamWorld, token: str) -> None:
    invite(world.team, "nina@example.com", by=world.owner)
    nina = make_user("nina")
    for method in ("get", "post"):
        response = getattr(client_for(nina), method)(f"/accounts/invitations/{token}/")
        assert response.status_code == 404
        assert "This invitation link is not valid" in response.content.decode()
    assert role_in(world.team, nina) is None


def test_a_member_accepting_again_is_told_and_the_invitation_stays_open(
    world: TeamWorld,
) -> None:
    invitation, raw = invite(world.team, "vera+2@example.com", by=world.owner, role=Role.OWNER)
    response = client_for(world.viewer).post(link(raw))
    assert response.status_code == 409
    assert "already a member" in response.content.decode()
    assert role_in(world.team, world.viewer) == Role.VIEWER
    invitation.refresh_from_db()
    assert invitation.is_open


def test_a_link_joins_the_team_it_was_sent_for_only(world: TeamWorld) -> None:
    _, raw = invite(world.other_team, "nina@example.com", by=world.outsider)
    nina = make_user("nina")
    client_for(nina).post(link(raw))
    assert role_in(world.other_team, nina) == Role.VIEWER
    assert role_in(world.team, nina) is None


def test_anonymous_visitor_sees_the_offer_and_ways_to_sign_in(world: TeamWorld) -> None:
    _, raw = invite(world.team, "nina@example.com", by=world.owner)
    response = Client().get(link(raw))
    assert response.status_code == 200
    body = response.content.decode()
    assert "Acme" in body
    assert f"{reverse('login')}?next={link(raw)}" in body
    assert f"{reverse('signup')}?invitation={raw}" in body
    assert '<form method="post" action="' + link(raw) not in body


def test_anonymous_accept_is_sent_to_sign_in_and_attaches_nothing(world: TeamWorld) -> None:
    _, raw = invite(world.team, "nina@example.com", by=world.owner)
    response = Client().post(link(raw))
    assert_redirects_to_login(response, link(raw))
    assert Membership.objects.filter(team=world.team).count() == 3


def test_invitee_signs_in_through_the_link_and_accepts(world: TeamWorld) -> None:
    from tests.builders.configuration import PASSWORD

    nina = make_user("nina")
    _, raw = invite(world.team, "nina@example.com", by=world.owner)
    client = Client()
    response = client.post(
        f"{reverse('login')}?next={link(raw)}",
        {"username": "nina", "password": PASSWORD, "next": link(raw)},
    )
    assert response["Location"] == link(raw)
    assert role_in(world.team, nina) is None
    assert client.post(link(raw)).status_code == 302
    assert role_in(world.team, nina) == Role.VIEWER


def test_an_unverified_accounts_invitation_names_neither_its_team_nor_the_inviter(
    world: TeamWorld,
) -> None:
    invite(world.team, "nina@example.com", by=world.owner)
    (message,) = mail.outbox
    assert isinstance(message, EmailMultiAlternatives)
    html = str(message.alternatives[0][0])
    assert message.subject == "[Latency Budgets] You are invited to join a team"
    for text in (message.subject, message.body, html):
        assert "Acme" not in text
        assert "olivia" not in text
    [raw] = tokens_mailed_to("nina@example.com")
    # The link's page names the team: the invitee sees it once they choose to look.
    assert "Acme" in Client().get(link(raw)).content.decode()


def test_a_verified_accounts_invitation_names_its_team_and_the_inviter(world: TeamWorld) -> None:
    verify_email(world.owner)
    invite(world.team, "nina@example.com", by=world.owner)
    (message,) = mail.outbox
    assert message.subject == "[Latency Budgets] olivia invited you to join Acme"
    assert "olivia invited you to join the team Acme" in message.body


def test_the_teams_of_one_account_share_its_invitation_allowance(
    world: TeamWorld, settings
) -> None:
    settings.ACCOUNT_INVITATIONS_PER_HOUR = 3
    second, third = (make_team(slug, owner=world.owner) for slug in ("acme-2", "acme-3"))
    co_owner = make_user("otto")
    add_member(third, co_owner, Role.OWNER)  # another user, the same account
    invite(world.team, "a@example.com", by=world.owner)
    invite(second, "b@example.com", by=world.owner)
    invite(third, "c@example.com", by=co_owner)
    with pytest.raises(ValidationError) as refused:
        invite(third, "d@example.com", by=co_owner)
    assert "ACCOUNT_INVITATIONS_PER_HOUR=3" in " ".join(refused.value.messages)
    assert not Invitation.objects.filter(email="d@example.com").exists()
    # Another account is not affected.
    invite(world.other_team, "e@example.com", by=world.outsider)
    assert len(mail.outbox) == 4
