"""A user's address is verified by a signed, expiring link pressed signed in, or by
accepting an invitation mailed to it; a change of address unverifies it."""

import re
import time
from urllib.parse import quote, urlsplit

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User as AuthUser
from django.core import mail
from django.test import Client

from apps.teams.models import EmailProof, EmailVerification, Role
from apps.teams.selectors import user_email_verified
from apps.teams.services import email_verification_link
from tests.builders.configuration import make_user, verify_email
from tests.conftest import TeamWorld, client_for
from tests.teams.conftest import assert_redirects_to_login
from tests.teams.invitations import invite, link, mailed_to

User = get_user_model()
VERIFY_LINK = re.compile(r"https?://[^/\s]+(/accounts/email/verify/[^/\s]+/)")
PAGE = "/accounts/email/"
SEND = "/accounts/email/send/"
PASSWORD = "a-much-longer-passphrase-42"


def verify_path(user: AuthUser) -> str:
    return urlsplit(email_verification_link(user=user)).path


def sign_up(client: Client, username: str, email: str, **extra: str) -> None:
    form = {"username": username, "email": email, "password1": PASSWORD, "password2": PASSWORD}
    response = client.post("/accounts/signup/", {**form, **extra})
    assert response.status_code == 302


def test_sign_up_mails_a_link_and_only_pressing_verify_signed_in_verifies(db: None) -> None:
    client = Client()
    sign_up(client, "nina", "Nina@Example.com")
    nina = User.objects.get(username="nina")
    (message,) = mail.outbox
    assert message.subject == "[Latency Budgets] Verify your e-mail address"
    assert "nina" not in message.body.lower().replace("nina@example.com", "")
    (path,) = mailed_to("Nina@example.com", VERIFY_LINK)
    assert not user_email_verified(user=nina)

    page = client.get(path)  # what a mail scanner following the link does
    assert page.status_code == 200
    assert "<button" in page.content.decode()
    assert not user_email_verified(user=nina)

    response = client.post(path)
    assert response.status_code == 302
    assert response["Location"] == PAGE
    assert user_email_verified(user=nina)
    assert EmailVerification.objects.get(user=nina).proof == EmailProof.LINK
    assert "verified" in client.get(PAGE).content.decode()


def test_sign_up_works_even_when_the_link_cannot_be_mailed(db: None, settings) -> None:
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", 9, 2
    client = Client()
    sign_up(client, "nina", "nina@example.com")
    assert User.objects.filter(username="nina").exists()
    assert "could not be sent a verification link" in client.get("/teams/new/").content.decode()


def test_the_link_does_nothing_for_another_account(db: None) -> None:
    nina = make_user("nina")
    path = verify_path(nina)
    oscar = client_for(make_user("oscar"))
    assert oscar.get(path).status_code == 400
    response = oscar.post(path)
    assert response.status_code == 400
    assert "another account" in response.content.decode()
    assert not EmailVerification.objects.exists()


def test_anonymous_visitors_of_the_link_are_sent_to_sign_in(db: None) -> None:
    path = verify_path(make_user("nina"))
    assert_redirects_to_login(Client().get(path), quote(path))
    assert_redirects_to_login(Client().post(path), quote(path))
    assert not EmailVerification.objects.exists()


def test_an_expired_link_is_refused(db: None, settings, monkeypatch: pytest.MonkeyPatch) -> None:
    settings.EMAIL_VERIFICATION_EXPIRY_HOURS = 1
    nina = make_user("nina")
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() - 3601)
    path = verify_path(nina)
    monkeypatch.setattr(time, "time", real)
    response = client_for(nina).post(path)
    assert response.status_code == 410
    assert "expired" in response.content.decode()
    assert not user_email_verified(user=nina)


def test_a_forged_link_is_refused(db: None) -> None:
    nina = make_user("nina")
    response = client_for(nina).post("/accounts/email/verify/not-a-signed-token/")
    assert response.status_code == 400
    assert not user_email_verified(user=nina)


def test_a_change_of_address_unverifies_and_old_links_stop_working(db: None) -> None:
    nina = verify_email(make_user("nina"))
    path = verify_path(nina)
    nina.email = "nina@elsewhere.example.com"
    nina.save()
    assert not user_email_verified(user=nina)
    response = client_for(nina).post(path)
    assert response.status_code == 400
    assert "no longer has" in response.content.decode()
    assert not user_email_verified(user=nina)


def test_accepting_an_invitation_mailed_to_ones_own_address_verifies_it(
    world: TeamWorld,
) -> None:
    nina = make_user("nina", email="Nina@example.com")
    _, raw = invite(world.team, "nina@EXAMPLE.com", by=world.owner, role=Role.VIEWER)
    assert client_for(nina).post(link(raw)).status_code == 302
    assert user_email_verified(user=nina)
    assert EmailVerification.objects.get(user=nina).proof == EmailProof.INVITATION


def test_accepting_an_invitation_mailed_elsewhere_verifies_nothing(world: TeamWorld) -> None:
    nina = make_user("nina", email="nina@home.example.com")
    _, raw = invite(world.team, "nina@work.example.com", by=world.owner)
    assert client_for(nina).post(link(raw)).status_code == 302
    assert not user_email_verified(user=nina)


def test_an_invitee_signing_up_with_the_invited_address_gets_no_extra_mail(
    world: TeamWorld,
) -> None:
    _, raw = invite(world.team, "nina@example.com", by=world.owner)
    mail.outbox.clear()
    client = Client()
    sign_up(client, "nina", "nina@example.com", invitation=raw)
    assert mail.outbox == []
    client.post(link(raw))
    assert user_email_verified(user=User.objects.get(username="nina"))


def test_users_ask_for_a_link_a_few_times_an_hour(db: None, settings) -> None:
    settings.EMAIL_VERIFICATION_SENDS_PER_HOUR = 2
    nina = make_user("nina")
    client = client_for(nina)
    assert [client.post(SEND).status_code for _ in range(2)] == [302, 302]
    refused = client.post(SEND)
    assert refused.status_code == 429
    assert 0 < int(refused["Retry-After"]) <= 3600
    assert "as many verification e-mails as allowed" in refused.content.decode()
    assert len(mailed_to("nina@example.com", VERIFY_LINK)) == 2


def test_a_verified_user_is_not_mailed_again(db: None) -> None:
    nina = verify_email(make_user("nina"))
    response = client_for(nina).post(SEND)
    assert response.status_code == 400
    assert "verified already" in response.content.decode()
    assert mail.outbox == []


def test_pages_offer_verifying_until_it_is_done(db: None) -> None:
    nina = make_user("nina")
    client = client_for(nina)
    assert 'id="verify-notice"' in client.get("/teams/new/").content.decode()
    page = client.get(PAGE).content.decode()
    assert "not verified" in page
    assert 'id="verify-notice"' not in page  # the page itself has the button
    verify_email(nina)
    assert 'id="verify-notice"' not in client.get("/teams/new/").content.decode()


def test_the_email_page_needs_a_sign_in(db: None) -> None:
    assert_redirects_to_login(Client().get(PAGE), PAGE)
    assert_redirects_to_login(Client().post(SEND), SEND)
