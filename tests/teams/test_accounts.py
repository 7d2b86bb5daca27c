import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from tests.builders.configuration import PASSWORD, make_user
from tests.conftest import client_for
from tests.teams.conftest import assert_redirects_to_login

User = get_user_model()
NEW_PASSWORD = "a-much-longer-passphrase-42"


def _session_user_id(client: Client) -> str | None:
    return client.session.get("_auth_user_id")


@pytest.mark.django_db
def test_login_page_shows_the_form_and_links_to_sign_up() -> None:
    response = Client().get("/accounts/login/")
    assert response.status_code == 200
    body = response.content.decode()
    assert 'name="username"' in body
    assert 'name="password"' in body
    assert reverse("signup") in body


@pytest.mark.django_db
def test_user_signs_in_with_the_real_form() -> None:
    user = make_user("olivia")
    client = Client()
    response = client.post("/accounts/login/", {"username": "olivia", "password": PASSWORD})
    assert response.status_code == 302
    assert response["Location"] == reverse("home")
    assert _session_user_id(client) == str(user.pk)


@pytest.mark.django_db
def test_sign_in_follows_a_safe_next_url_only() -> None:
    make_user("olivia")
    client = Client()
    response = client.post(
        "/accounts/login/?next=/teams/tokens/",
        {"username": "olivia", "password": PASSWORD, "next": "/teams/tokens/"},
    )
    assert response["Location"] == "/teams/tokens/"
    client = Client()
    response = client.post(
        "/accounts/login/",
        {"username": "olivia", "password": PASSWORD, "next": "https://evil.example/"},
    )
    assert response["Location"] == reverse("home")


@pytest.mark.django_db
def test_wrong_password_shows_an_error_and_does_not_sign_in() -> None:
    make_user("olivia")
    client = Client()
    response = client.post("/accounts/login/", {"username": "olivia", "password": "nope"})
    assert response.status_code == 200
    assert 'class="errorlist' in response.content.decode()
    assert _session_user_id(client) is None


@pytest.mark.django_db
def test_oversized_login_input_is_rejected_without_signing_in() -> None:
    client = Client()
    response = client.post("/accounts/login/", {"username": "x" * 5000, "password": "y" * 5000})
    assert response.status_code == 200
    assert _session_user_id(client) is None


@pytest.mark.django_db
def test_logout_by_post_signs_the_user_out() -> None:
    client = client_for(make_user("olivia"))
    response = client.post("/accounts/logout/")
    assert response.status_code == 302
    assert response["Location"] == reverse("login")
    assert _session_user_id(client) is None


@pytest.mark.django_db
def test_logout_by_get_is_refused_and_keeps_the_session() -> None:
    user = make_user("olivia")
    client = client_for(user)
    response = client.get("/accounts/logout/")
    assert response.status_code == 405
    assert _session_user_id(client) == str(user.pk)


@pytest.mark.django_db
def test_anonymous_password_change_redirects_to_login() -> None:
    assert_redirects_to_login(Client().get("/accounts/password/"), "/accounts/password/")


@pytest.mark.django_db
def test_user_changes_password_and_stays_signed_in() -> None:
    user = make_user("olivia")
    client = client_for(user)
    assert client.get("/accounts/password/").status_code == 200
    response = client.post(
        "/accounts/password/",
        {"old_password": PASSWORD, "new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD},
    )
    assert response.status_code == 302
    assert response["Location"] == reverse("password_change_done")
    user.refresh_from_db()
    assert user.check_password(NEW_PASSWORD)
    assert client.get(response["Location"]).status_code == 200


@pytest.mark.django_db
def test_password_change_with_wrong_old_password_keeps_the_old_one() -> None:
    user = make_user("olivia")
    response = client_for(user).post(
        "/accounts/password/",
        {"old_password": "wrong", "new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD},
    )
    assert response.status_code == 200
    assert 'class="errorlist' in response.content.decode()
    user.refresh_from_db()
    assert user.check_password(PASSWORD)


@pytest.mark.django_db
def test_sign_up_creates_the_user_signs_them_in_and_asks_for_a_team() -> None:
    client = Client()
    assert client.get("/accounts/signup/").status_code == 200
    response = client.post(
        "/accounts/signup/",
        {
            "username": "nina",
            "email": "Nina@Example.com",
            "password1": NEW_PASSWORD,
            "password2": NEW_PASSWORD,
        },
    )
    assert response.status_code == 302
    assert response["Location"] == reverse("teams:create")
    user = User.objects.get(username="nina")
    assert user.email == "Nina@example.com"
    assert user.check_password(NEW_PASSWORD)
    assert _session_user_id(client) == str(user.pk)


@pytest.mark.django_db
def test_sign_up_refuses_an_email_already_in_use() -> None:
    make_user("olivia", email="olivia@example.com")
    response = Client().post(
        "/accounts/signup/",
        {
            "username": "olivia2",
            "email": "OLIVIA@example.com",
            "password1": NEW_PASSWORD,
            "password2": NEW_PASSWORD,
        },
    )
    assert response.status_code == 200
    assert "already exists" in response.content.decode()
    assert not User.objects.filter(username="olivia2").exists()


@pytest.mark.django_db
def test_sign_up_refuses_a_taken_username_in_any_case() -> None:
    make_user("olivia")
    response = Client().post(
        "/accounts/signup/",
        {
            "username": "Olivia",
            "email": "new@example.com",
            "password1": NEW_PASSWORD,
            "password2": NEW_PASSWORD,
        },
    )
    assert response.status_code == 200
    assert User.objects.filter(username__iexact="olivia").count() == 1


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("username", "email", "password2"),
    [
        ("nina", "nina@example.com", "does-not-match-99"),
        ("nina", "not-an-email", NEW_PASSWORD),
        ("n" * 200, "nina@example.com", NEW_PASSWORD),
        ("", "nina@example.com", NEW_PASSWORD),
    ],
)
def test_sign_up_with_bad_input_shows_errors_and_creates_nobody(
    username: str, email: str, password2: str
) -> None:
    response = Client().post(
        "/accounts/signup/",
        {"username": username, "email": email, "password1": NEW_PASSWORD, "password2": password2},
    )
    assert response.status_code == 200
    assert 'class="errorlist' in response.content.decode()
    assert not User.objects.exists()


@pytest.mark.django_db
def test_signed_in_user_visiting_sign_up_goes_home() -> None:
    response = client_for(make_user("olivia")).get("/accounts/signup/")
    assert response.status_code == 302
    assert response["Location"] == reverse("home")
