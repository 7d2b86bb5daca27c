import io

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.test import APIRequestFactory
from rest_framework.views import APIView

from apps.teams.authentication import ApiTokenAuthentication
from apps.teams.models import ApiToken
from apps.teams.services import api_token_create
from apps.teams.tokens import token_digest
from tests.builders.configuration import PASSWORD, make_user
from tests.conftest import TeamWorld, client_for
from tests.teams.conftest import HTMX, assert_redirects_to_login

URL = "/teams/tokens/"
NEW = "a-much-longer-passphrase-42"


class WhoAmI(APIView):
    authentication_classes = [ApiTokenAuthentication]
    permission_classes = [IsAuthenticated]

    def get(self, request: Request) -> Response:
        return Response({"username": request.user.get_username()})


def call_api(raw: str | None) -> Response:
    headers = {"Authorization": f"Bearer {raw}"} if raw else {}
    request = APIRequestFactory().get("/whoami", headers=headers)
    return WhoAmI.as_view()(request)


def revoke_url(token: ApiToken) -> str:
    return f"/teams/tokens/{token.pk}/revoke/"


# --- Page and creation ------------------------------------------------------------------


def test_anonymous_is_sent_to_login(db: None) -> None:
    assert_redirects_to_login(Client().get(URL), URL)
    assert_redirects_to_login(Client().post(URL, {"name": "x"}), URL)
    assert not ApiToken.objects.exists()


@pytest.mark.parametrize("role", ["owner", "editor", "viewer", "outsider"])
def test_any_user_creates_a_token_shown_once(world: TeamWorld, role: str) -> None:
    user = getattr(world, role)
    client = client_for(user)
    response = client.post(URL, {"name": "CI deploy"})
    assert response.status_code == 200
    raw = response.context["new_token"]
    body = response.content.decode()
    assert raw in body
    assert "Copy your new token now" in body
    assert "no-store" in response["Cache-Control"]
    token = ApiToken.objects.get(user=user)
    assert token.name == "CI deploy"
    assert raw.startswith(token.prefix)
    # Shown once: the list page never contains it again.
    assert raw not in client.get(URL).content.decode()


def test_token_is_stored_only_as_a_digest(db: None) -> None:
    user = make_user()
    response = client_for(user).post(URL, {"name": "laptop"})
    raw = response.context["new_token"]
    token = ApiToken.objects.get(user=user)
    assert token.digest == token_digest(raw)
    assert token.digest != raw
    assert not ApiToken.objects.filter(digest=raw).exists()
    stored = ApiToken.objects.values_list("name", "prefix", "digest").get()
    assert all(raw not in value for value in stored)


@pytest.mark.parametrize("name", ["", "   ", "n" * 101])
def test_bad_token_name_is_rejected_inline(db: None, name: str) -> None:
    response = client_for(make_user()).post(URL, {"name": name})
    assert response.status_code == 200
    assert 'class="errorlist' in response.content.decode()
    assert not response.context["new_token"]
    assert not ApiToken.objects.exists()


def test_list_shows_only_my_tokens_with_their_details(world: TeamWorld) -> None:
    mine, _ = api_token_create(user=world.editor, name="mine")
    theirs, _ = api_token_create(user=world.viewer, name="theirs")
    response = client_for(world.editor).get(URL)
    assert list(response.context["tokens"]) == [mine]
    body = response.content.decode()
    assert "mine" in body
    assert mine.prefix in body
    assert theirs.prefix not in body
    assert "never" in body
    assert "active" in body


# --- Revocation ---------------------------------------------------------------------------


def test_revoked_token_gets_401_from_the_api(db: None) -> None:
    user = make_user("olivia")
    client = client_for(user)
    raw = client.post(URL, {"name": "ci"}).context["new_token"]
    ok = call_api(raw)
    assert ok.status_code == 200
    assert ok.data == {"username": "olivia"}
    token = ApiToken.objects.get(user=user)
    assert token.last_used_at is not None

    response = client.post(revoke_url(token))
    assert response.status_code == 302
    assert response["Location"] == URL
    token.refresh_from_db()
    assert token.revoked_at is not None
    assert call_api(raw).status_code == 401


def test_api_answers_401_without_or_with_a_bad_token(db: None) -> None:
    assert call_api(None).status_code == 401
    assert call_api("lbk_not-a-real-token").status_code == 401
    assert call_api("x" * 10_000).status_code == 401


def test_revoke_with_htmx_returns_the_table(db: None) -> None:
    user = make_user()
    token, _ = api_token_create(user=user, name="ci")
    response = client_for(user).post(revoke_url(token), headers=HTMX)
    assert response.status_code == 200
    body = response.content.decode()
    assert body.lstrip().startswith('<div id="token-table">')
    assert "revoked" in body
    token.refresh_from_db()
    assert not token.is_active


def test_revoking_twice_keeps_the_first_revocation_time(db: None) -> None:
    user = make_user()
    token, _ = api_token_create(user=user, name="ci")
    client = client_for(user)
    client.post(revoke_url(token))
    token.refresh_from_db()
    first = token.revoked_at
    client.post(revoke_url(token))
    token.refresh_from_db()
    assert token.revoked_at == first


def test_another_users_token_is_404_and_stays_active(world: TeamWorld) -> None:
    token, raw = api_token_create(user=world.owner, name="owner's")
    for user in (world.editor, world.viewer, world.outsider):
        assert client_for(user).post(revoke_url(token)).status_code == 404
    token.refresh_from_db()
    assert token.is_active
    assert call_api(raw).status_code == 200


def test_anonymous_revoke_is_sent_to_login(db: None) -> None:
    token, _ = api_token_create(user=make_user(), name="ci")
    assert_redirects_to_login(Client().post(revoke_url(token)), revoke_url(token))
    token.refresh_from_db()
    assert token.is_active


def test_revoke_refuses_get(db: None) -> None:
    user = make_user()
    token, _ = api_token_create(user=user, name="ci")
    assert client_for(user).get(revoke_url(token)).status_code == 405
    token.refresh_from_db()
    assert token.is_active


def test_unknown_token_id_is_404(db: None) -> None:
    assert client_for(make_user()).post("/teams/tokens/999999/revoke/").status_code == 404


# --- Expiry and password changes ----------------------------------------------------------


def test_a_token_made_to_expire_works_until_then_and_the_list_says_when(db: None) -> None:
    user = make_user()
    client = client_for(user)
    client.post(URL, {"name": "ci", "expires": "30"})
    token = ApiToken.objects.get(user=user)
    assert token.expires_at is not None
    assert (token.expires_at - timezone.now()).days in (29, 30)
    raw_token, raw = api_token_create(user=user, name="short", expires_in_days=1)
    assert call_api(raw).status_code == 200

    ApiToken.objects.filter(pk=raw_token.pk).update(expires_at=timezone.now())

    assert call_api(raw).status_code == 401
    page = client.get(URL).content.decode()
    assert "expired" in page
    assert token.expires_at.strftime("%-d %b %Y") in page


def test_a_token_without_expiry_is_a_choice_and_an_impossible_expiry_is_refused(
    db: None,
) -> None:
    user = make_user()
    client_for(user).post(URL, {"name": "forever", "expires": ""})
    assert ApiToken.objects.get(user=user).expires_at is None
    with pytest.raises(ValidationError):
        api_token_create(user=user, name="x", expires_in_days=0)
    refused = client_for(user).post(URL, {"name": "odd", "expires": "7"})
    assert refused.status_code == 200
    assert 'class="errorlist' in refused.content.decode()
    assert not ApiToken.objects.filter(name="odd").exists()


def test_changing_the_password_on_its_page_revokes_every_token(db: None) -> None:
    user = make_user()
    tokens = [api_token_create(user=user, name=f"t{n}")[1] for n in range(2)]
    other = make_user()
    _, theirs = api_token_create(user=other, name="theirs")

    changed = client_for(user).post(
        "/accounts/password/",
        {"old_password": PASSWORD, "new_password1": NEW, "new_password2": NEW},
    )

    assert changed.status_code == 302
    assert [call_api(raw).status_code for raw in tokens] == [401, 401]
    assert set(ApiToken.objects.filter(user=user).values_list("revoked_reason", flat=True)) == {
        "the password changed"
    }
    assert call_api(theirs).status_code == 200  # another user's tokens are theirs
    user.refresh_from_db()  # signed in again with the new password
    assert "the password changed" in client_for(user).get(URL).content.decode()


def test_a_password_set_by_an_operator_revokes_the_tokens_too(db: None) -> None:
    user = make_user()
    _, raw = api_token_create(user=user, name="t")
    user.set_password(NEW)
    user.save()
    assert call_api(raw).status_code == 401


def test_a_rehash_of_the_same_password_at_sign_in_revokes_nothing(db: None, settings) -> None:
    user = make_user()
    _, raw = api_token_create(user=user, name="t")
    # Another hasher first: signing in re-hashes the unchanged password with it.
    settings.PASSWORD_HASHERS = [
        "django.contrib.auth.hashers.PBKDF2PasswordHasher",
        "django.contrib.auth.hashers.MD5PasswordHasher",
    ]
    client = Client()
    assert client.post("/accounts/login/", {"username": user.username, "password": PASSWORD})[
        "Location"
    ]
    user.refresh_from_db()
    assert user.password.startswith("pbkdf2_sha256$")
    assert call_api(raw).status_code == 200


def test_the_command_makes_a_token_that_expires(db: None) -> None:
    user = make_user("ops")
    out = io.StringIO()
    call_command("api_token", "create", "--user", "ops", "--expires-days", "7", stdout=out)
    token = ApiToken.objects.get(user=user)
    assert token.expires_at is not None
    assert call_api(out.getvalue().splitlines()[-1]).status_code == 200
    with pytest.raises(CommandError, match="1 to 3650 days"):
        call_command("api_token", "create", "--user", "ops", "--expires-days", "0")
