"""Failed sign-ins lock a username out from one address; sign-ups are counted per address."""

import logging
from datetime import timedelta
from typing import Any

import pytest
from axes.models import AccessAttempt
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from apps.teams import client_ip
from tests.builders.api import session_client, token_client
from tests.builders.configuration import PASSWORD, make_user
from tests.conftest import TeamWorld

User = get_user_model()
LOGIN = "/accounts/login/"
SIGNUP = "/accounts/signup/"
NEW_PASSWORD = "a-much-longer-passphrase-42"


def attempt(client: Client, password: str, username: str = "olivia", **extra: Any):
    return client.post(LOGIN, {"username": username, "password": password}, **extra)


def signed_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def sign_up(client: Client, n: int, **extra: Any):
    return client.post(
        SIGNUP,
        {
            "username": f"user{n}",
            "email": f"user{n}@example.com",
            "password1": NEW_PASSWORD,
            "password2": NEW_PASSWORD,
        },
        **extra,
    )


def test_the_lockout_backend_comes_first() -> None:
    assert django_settings.AUTHENTICATION_BACKENDS[0] == "axes.backends.AxesStandaloneBackend"


def test_thirty_wrong_passwords_lock_the_username_out_even_for_the_right_one(
    world: TeamWorld, settings
) -> None:
    settings.LOGIN_FAILURES_PER_ADDRESS = 100  # the limit over all usernames is not tested here
    client = Client()
    answers = [attempt(client, f"wrong-{n}").status_code for n in range(30)]
    limit = django_settings.LOGIN_FAILURE_LIMIT
    assert answers[: limit - 1] == [200] * (limit - 1)
    assert set(answers[limit - 1 :]) == {429}

    response = attempt(client, PASSWORD)
    assert response.status_code == 429
    assert response["Retry-After"] == str(django_settings.LOGIN_LOCKOUT_MINUTES * 60)
    assert "Sign-in paused" in response.content.decode()
    assert not signed_in(client)
    # It stays locked: trying again does not get through either.
    assert attempt(Client(), PASSWORD).status_code == 429


def test_the_lockout_ends_after_the_cool_off(world: TeamWorld) -> None:
    client = Client()
    for n in range(django_settings.LOGIN_FAILURE_LIMIT):
        attempt(client, f"wrong-{n}")
    assert attempt(client, PASSWORD).status_code == 429
    cool_off = timedelta(minutes=django_settings.LOGIN_LOCKOUT_MINUTES)
    AccessAttempt.objects.update(attempt_time=timezone.now() - cool_off + timedelta(minutes=1))
    assert attempt(client, PASSWORD).status_code == 429
    AccessAttempt.objects.update(attempt_time=timezone.now() - cool_off - timedelta(seconds=1))
    response = attempt(client, PASSWORD)
    assert response.status_code == 302
    assert signed_in(client)


def test_the_lockout_holds_one_username_from_one_address_only(world: TeamWorld) -> None:
    for n in range(django_settings.LOGIN_FAILURE_LIMIT):
        attempt(Client(), f"wrong-{n}")
    assert attempt(Client(), PASSWORD).status_code == 429
    # The same user from elsewhere, and another user from here, still sign in.
    elsewhere = Client(REMOTE_ADDR="203.0.113.9")
    assert attempt(elsewhere, PASSWORD).status_code == 302
    assert attempt(Client(), PASSWORD, username="eddie").status_code == 302


def test_a_successful_sign_in_resets_the_count(world: TeamWorld) -> None:
    below = django_settings.LOGIN_FAILURE_LIMIT - 1
    for n in range(below):
        attempt(Client(), f"wrong-{n}")
    assert attempt(Client(), PASSWORD).status_code == 302
    for n in range(below):
        assert attempt(Client(), f"wrong-{n}").status_code == 200
    assert attempt(Client(), PASSWORD).status_code == 302


def test_an_overlong_username_is_a_form_error_not_a_lockout_record(db: None) -> None:
    response = attempt(Client(), "x", username="x" * 5000)
    assert response.status_code == 200
    assert 'class="errorlist' in response.content.decode()
    assert not AccessAttempt.objects.exists()


def test_api_tokens_and_sessions_keep_working_for_a_locked_out_user(world: TeamWorld) -> None:
    for n in range(django_settings.LOGIN_FAILURE_LIMIT):
        attempt(Client(), f"wrong-{n}")
    assert attempt(Client(), PASSWORD).status_code == 429
    assert token_client(world.owner).get("/api/v1/me/").status_code == 200
    assert session_client(world.owner).get("/api/v1/me/").status_code == 200
    assert token_client(world.owner).get("/api/v1/pipelines/").status_code == 200


def test_a_bad_token_is_401_and_no_lockout_record(world: TeamWorld) -> None:
    client = Client(headers={"Authorization": "Bearer lbk_nope"})
    for _ in range(15):
        assert client.get("/api/v1/me/").status_code == 401
    assert token_client(world.owner).get("/api/v1/me/").status_code == 200
    assert not AccessAttempt.objects.exists()


# --- Sign-ups ----------------------------------------------------------------------------


def test_twenty_sign_ups_from_one_address_are_refused_past_the_limit(db: None, settings) -> None:
    settings.SIGNUP_RATE_PER_HOUR = 5
    answers = [sign_up(Client(), n).status_code for n in range(20)]
    assert answers == [302] * 5 + [429] * 15
    assert User.objects.count() == 5
    refused = sign_up(Client(), 99)
    assert "Too many sign-ups" in refused.content.decode()
    assert 0 < int(refused["Retry-After"]) <= 3600


def test_the_default_sign_up_limit_applies(db: None) -> None:
    limit = django_settings.SIGNUP_RATE_PER_HOUR
    answers = [sign_up(Client(), n).status_code for n in range(limit + 3)]
    assert answers == [302] * limit + [429] * 3


def test_failed_sign_up_attempts_count_too(db: None, settings) -> None:
    settings.SIGNUP_RATE_PER_HOUR = 3
    make_user("taken", email="taken@example.com")
    for _ in range(3):
        response = Client().post(
            SIGNUP,
            {"username": "x", "email": "taken@example.com", "password1": "a", "password2": "b"},
        )
        assert response.status_code == 200
    assert sign_up(Client(), 1).status_code == 429


def test_another_address_may_still_sign_up(db: None, settings) -> None:
    settings.SIGNUP_RATE_PER_HOUR = 2
    for n in range(3):
        sign_up(Client(), n)
    assert sign_up(Client(REMOTE_ADDR="198.51.100.7"), 10).status_code == 302


def test_behind_a_proxy_the_forwarded_address_counts(db: None, settings) -> None:
    settings.SIGNUP_RATE_PER_HOUR = 1
    settings.CLIENT_IP_PROXY_COUNT = 1
    # Clients behind the same proxy are told apart; what they put in front is ignored.
    first = sign_up(Client(), 1, HTTP_X_FORWARDED_FOR="198.51.100.1")
    spoofed = sign_up(Client(), 2, HTTP_X_FORWARDED_FOR="1.2.3.4, 198.51.100.1")
    other = sign_up(Client(), 3, HTTP_X_FORWARDED_FOR="198.51.100.2")
    assert [first.status_code, spoofed.status_code, other.status_code] == [302, 429, 302]


def test_without_a_trusted_proxy_the_forwarded_header_is_ignored(db: None, settings) -> None:
    settings.SIGNUP_RATE_PER_HOUR = 1
    assert sign_up(Client(), 1, HTTP_X_FORWARDED_FOR="198.51.100.1").status_code == 302
    assert sign_up(Client(), 2, HTTP_X_FORWARDED_FOR="198.51.100.2").status_code == 429


def test_a_zero_limit_turns_the_sign_up_limit_off(db: None, settings) -> None:
    settings.SIGNUP_RATE_PER_HOUR = 0
    assert all(sign_up(Client(), n).status_code == 302 for n in range(12))


def test_a_forwarded_header_without_a_proxy_count_is_logged_loudly_once(
    db: None, settings, caplog: pytest.LogCaptureFixture
) -> None:
    settings.SIGNUP_RATE_PER_HOUR = 0
    client_ip._warned.clear()
    with caplog.at_level(logging.ERROR, logger="apps.teams.client_ip"):
        for n in range(3):
            sign_up(Client(), n, HTTP_X_FORWARDED_FOR=f"198.51.100.{n}")

    warnings = [r for r in caplog.records if "CLIENT_IP_PROXY_COUNT is 0" in r.getMessage()]
    assert len(warnings) == 1
    assert warnings[0].levelno == logging.ERROR


def test_spraying_one_password_over_many_usernames_pauses_the_address(db: None, settings) -> None:
    settings.LOGIN_FAILURES_PER_ADDRESS = 30
    victim = make_user("olivia")
    for n in range(40):
        make_user(f"user{n}")
    sprayer = Client(REMOTE_ADDR="203.0.113.9")

    answers = [attempt(sprayer, "Summer2026!", username=f"user{n}").status_code for n in range(40)]

    # No username failed twice, so django-axes alone would have let every attempt through.
    assert answers[:30] == [200] * 30
    assert set(answers[30:]) == {429}
    paused = attempt(sprayer, PASSWORD, username=victim.username)
    assert paused.status_code == 429
    assert "from your address, for several usernames" in paused.content.decode()
    assert 1 <= int(paused["Retry-After"]) <= settings.LOGIN_LOCKOUT_MINUTES * 60
    assert not signed_in(sprayer)
    # The victim signs in from their own address meanwhile.
    own = Client(REMOTE_ADDR="198.51.100.20")
    assert attempt(own, PASSWORD, username=victim.username).status_code == 302
    assert signed_in(own)
