from datetime import timedelta
from io import StringIO

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from apps.teams.models import IngestToken, Team
from apps.teams.services import (
    api_token_create,
    ingest_token_authenticate,
    ingest_token_create,
    ingest_token_revoke,
)
from apps.teams.tokens import token_digest
from tests.builders.configuration import make_user
from tests.conftest import TeamWorld, client_for
from tests.teams.conftest import HTMX, assert_redirects_to_login

URL = "/teams/acme/ingest-tokens/"
INGEST_ONLY = "Ingest tokens can only send spans; use a personal API token."


def revoke_url(token: IngestToken, team_slug: str = "acme") -> str:
    return f"/teams/{team_slug}/ingest-tokens/{token.pk}/revoke/"


def make_token(team: Team, name: str = "collector") -> tuple[IngestToken, str]:
    return ingest_token_create(team=team, name=name, created_by=None)


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


# --- Hashed at rest ---------------------------------------------------------------------------


def test_a_token_is_stored_only_as_a_digest(world: TeamWorld) -> None:
    token, raw = ingest_token_create(team=world.team, name="prod", created_by=world.owner)
    assert raw.startswith("lbi_")
    assert len(raw) > 40
    assert token.prefix == raw[:12]
    assert token.digest == token_digest(raw)
    row = IngestToken.objects.filter(pk=token.pk).values().get()
    assert all(raw not in str(value) for value in row.values())
    assert not IngestToken.objects.filter(digest=raw).exists()


def test_each_token_is_different(world: TeamWorld) -> None:
    raws = {make_token(world.team)[1] for _ in range(5)}
    assert len(raws) == 5
    assert IngestToken.objects.count() == 5


# --- Page: who sees it -------------------------------------------------------------------------


def test_anonymous_is_sent_to_login(world: TeamWorld) -> None:
    assert_redirects_to_login(Client().get(URL), URL)
    assert_redirects_to_login(Client().post(URL, {"name": "x"}), URL)
    assert not IngestToken.objects.exists()


@pytest.mark.parametrize("role", ["owner", "editor", "viewer"])
def test_members_see_the_teams_tokens_with_their_details(world: TeamWorld, role: str) -> None:
    mine, _ = ingest_token_create(team=world.team, name="prod collector", created_by=world.editor)
    theirs, _ = make_token(world.other_team, "globex collector")
    response = client_for(getattr(world, role)).get(URL)
    assert response.status_code == 200
    assert list(response.context["tokens"]) == [mine]
    assert response.context["team"] == world.team
    body = response.content.decode()
    assert "prod collector" in body
    assert mine.prefix in body
    assert "eddie" in body
    assert "never" in body
    assert "active" in body
    assert theirs.prefix not in body
    assert "globex collector" not in body


def test_viewer_sees_no_create_form_or_revoke_button(world: TeamWorld) -> None:
    token, _ = make_token(world.team)
    response = client_for(world.viewer).get(URL)
    body = response.content.decode()
    assert response.context["form"] is None
    assert "Create ingest token" not in body
    assert revoke_url(token) not in body


def test_editor_sees_the_create_form_and_revoke_button(world: TeamWorld) -> None:
    token, _ = make_token(world.team)
    body = client_for(world.editor).get(URL).content.decode()
    assert "Create ingest token" in body
    assert f'hx-post="{revoke_url(token)}"' in body
    assert f'action="{revoke_url(token)}"' in body


def test_outsider_gets_404(world: TeamWorld) -> None:
    client = client_for(world.outsider)
    assert client.get(URL).status_code == 404
    assert client.post(URL, {"name": "sneaky"}).status_code == 404
    assert not IngestToken.objects.exists()


def test_unknown_team_is_404(world: TeamWorld) -> None:
    assert client_for(world.owner).get("/teams/nope/ingest-tokens/").status_code == 404


def test_team_nav_links_to_the_page(world: TeamWorld) -> None:
    body = client_for(world.viewer).get("/teams/acme/members/").content.decode()
    assert f'href="{URL}"' in body


# --- Creating -----------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["owner", "editor"])
def test_writer_creates_a_token_shown_once_with_setup_lines(world: TeamWorld, role: str) -> None:
    user = getattr(world, role)
    client = client_for(user)
    response = client.post(URL, {"name": "prod collector"})
    assert response.status_code == 200
    raw = response.context["new_token"]
    token = IngestToken.objects.get()
    assert token.team == world.team
    assert token.name == "prod collector"
    assert token.created_by == user
    assert token.digest == token_digest(raw)
    body = response.content.decode()
    assert "Copy your new token now" in body
    assert raw in body
    assert f"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT={settings.SITE_URL}/v1/traces" in body
    assert f"OTEL_EXPORTER_OTLP_HEADERS=Authorization=Bearer%20{raw}" in body
    assert "no-store" in response["Cache-Control"]
    # Shown once: the page never contains it again.
    again = client.get(URL).content.decode()
    assert raw not in again
    assert "Copy your new token now" not in again


def test_viewer_gets_403_on_create(world: TeamWorld) -> None:
    response = client_for(world.viewer).post(URL, {"name": "sneaky"})
    assert response.status_code == 403
    assert not IngestToken.objects.exists()


@pytest.mark.parametrize("name", ["", "   ", "n" * 101])
def test_bad_token_name_is_rejected_inline(world: TeamWorld, name: str) -> None:
    response = client_for(world.owner).post(URL, {"name": name})
    assert response.status_code == 200
    assert 'class="errorlist' in response.content.decode()
    assert not response.context["new_token"]
    assert not IngestToken.objects.exists()


def test_a_missing_name_field_is_rejected_inline(world: TeamWorld) -> None:
    response = client_for(world.owner).post(URL, {})
    assert response.status_code == 200
    assert response.context["form"].errors["name"]
    assert not IngestToken.objects.exists()


def test_create_refuses_other_methods(world: TeamWorld) -> None:
    assert client_for(world.owner).put(URL).status_code == 405
    assert not IngestToken.objects.exists()


# --- Revoking -----------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["owner", "editor"])
def test_writer_revokes_without_javascript(world: TeamWorld, role: str) -> None:
    token, raw = make_token(world.team)
    response = client_for(getattr(world, role)).post(revoke_url(token))
    assert response.status_code == 302
    assert response["Location"] == URL
    token.refresh_from_db()
    assert token.revoked_at is not None
    assert ingest_token_authenticate(raw=raw) is None


def test_revoke_with_htmx_returns_the_table(world: TeamWorld) -> None:
    token, _ = make_token(world.team)
    response = client_for(world.owner).post(revoke_url(token), headers=HTMX)
    assert response.status_code == 200
    body = response.content.decode()
    assert body.lstrip().startswith('<div id="ingest-token-table">')
    assert "<html" not in body
    assert "revoked" in body
    token.refresh_from_db()
    assert not token.is_active


def test_viewer_gets_403_on_revoke(world: TeamWorld) -> None:
    token, raw = make_token(world.team)
    assert client_for(world.viewer).post(revoke_url(token)).status_code == 403
    token.refresh_from_db()
    assert token.is_active
    assert ingest_token_authenticate(raw=raw) is not None


def test_outsider_gets_404_on_revoke(world: TeamWorld) -> None:
    token, _ = make_token(world.team)
    assert client_for(world.outsider).post(revoke_url(token)).status_code == 404
    token.refresh_from_db()
    assert token.is_active


def test_anonymous_revoke_is_sent_to_login(world: TeamWorld) -> None:
    token, _ = make_token(world.team)
    assert_redirects_to_login(Client().post(revoke_url(token)), revoke_url(token))
    token.refresh_from_db()
    assert token.is_active


def test_another_teams_token_is_404_and_stays_active(world: TeamWorld) -> None:
    theirs, raw = make_token(world.other_team)
    # Olivia owns acme; the token id belongs to globex.
    assert client_for(world.owner).post(revoke_url(theirs, "acme")).status_code == 404
    assert client_for(world.owner).post(revoke_url(theirs, "globex")).status_code == 404
    theirs.refresh_from_db()
    assert theirs.is_active
    assert ingest_token_authenticate(raw=raw) is not None


def test_revoking_twice_keeps_the_first_revocation_time(world: TeamWorld) -> None:
    token, _ = make_token(world.team)
    client = client_for(world.owner)
    client.post(revoke_url(token))
    token.refresh_from_db()
    first = token.revoked_at
    assert client.post(revoke_url(token)).status_code == 302
    token.refresh_from_db()
    assert token.revoked_at == first


def test_revoke_refuses_get(world: TeamWorld) -> None:
    token, _ = make_token(world.team)
    assert client_for(world.owner).get(revoke_url(token)).status_code == 405
    token.refresh_from_db()
    assert token.is_active


def test_unknown_token_id_is_404(world: TeamWorld) -> None:
    response = client_for(world.owner).post("/teams/acme/ingest-tokens/999999/revoke/")
    assert response.status_code == 404


# --- Authenticating -----------------------------------------------------------------------------


def test_an_active_token_authenticates_with_its_team(world: TeamWorld) -> None:
    token, raw = make_token(world.team)
    found = ingest_token_authenticate(raw=raw)
    assert found == token
    assert found is not None
    assert found.team == world.team
    assert found.last_used_at is not None
    token.refresh_from_db()
    assert token.last_used_at == found.last_used_at


@pytest.mark.parametrize("raw", ["", "lbi_", "lbi_not-a-real-token", "nonsense", "x" * 10_000])
def test_unknown_values_do_not_authenticate(world: TeamWorld, raw: str) -> None:
    make_token(world.team)
    assert ingest_token_authenticate(raw=raw) is None


def test_a_revoked_token_does_not_authenticate(world: TeamWorld) -> None:
    token, raw = make_token(world.team)
    ingest_token_revoke(token=token)
    assert ingest_token_authenticate(raw=raw) is None
    token.refresh_from_db()
    assert token.last_used_at is None


def test_a_personal_api_token_is_not_an_ingest_token(world: TeamWorld) -> None:
    _, raw = api_token_create(user=world.owner, name="personal")
    assert ingest_token_authenticate(raw=raw) is None


def test_last_used_is_written_at_most_once_a_minute(world: TeamWorld) -> None:
    token, raw = make_token(world.team)
    ingest_token_authenticate(raw=raw)
    token.refresh_from_db()
    first = token.last_used_at
    assert first is not None

    again = ingest_token_authenticate(raw=raw)
    assert again is not None
    assert again.last_used_at == first
    token.refresh_from_db()
    assert token.last_used_at == first

    half_a_minute_ago = timezone.now() - timedelta(seconds=30)
    IngestToken.objects.filter(pk=token.pk).update(last_used_at=half_a_minute_ago)
    ingest_token_authenticate(raw=raw)
    token.refresh_from_db()
    assert token.last_used_at == half_a_minute_ago

    two_minutes_ago = timezone.now() - timedelta(minutes=2)
    IngestToken.objects.filter(pk=token.pk).update(last_used_at=two_minutes_ago)
    found = ingest_token_authenticate(raw=raw)
    token.refresh_from_db()
    assert token.last_used_at > two_minutes_ago
    assert found is not None
    assert found.last_used_at == token.last_used_at


def test_a_token_outlives_its_creator(world: TeamWorld) -> None:
    creator = make_user("leaver")
    token, raw = ingest_token_create(team=world.team, name="prod", created_by=creator)
    creator.delete()
    token.refresh_from_db()
    assert token.created_by is None
    assert ingest_token_authenticate(raw=raw) == token
    assert "—" in client_for(world.viewer).get(URL).content.decode()


def test_deleting_the_team_deletes_its_tokens(world: TeamWorld) -> None:
    make_token(world.other_team)
    world.other_team.delete()
    assert not IngestToken.objects.exists()


# --- Write-only: the REST API refuses ingest tokens ---------------------------------------------


def bearer(raw: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


@pytest.mark.parametrize("path", ["/api/v1/pipelines/", "/api/v1/teams/", "/api/v1/me/"])
def test_the_api_answers_401_to_an_ingest_token(world: TeamWorld, path: str) -> None:
    token, raw = make_token(world.team)
    response = bearer(raw).get(path)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Bearer"
    assert response.json()["error"] == {"code": "authentication_failed", "message": INGEST_ONLY}
    # Refused before any lookup: a read attempt does not count as use.
    token.refresh_from_db()
    assert token.last_used_at is None


def test_the_api_refuses_writes_with_an_ingest_token(world: TeamWorld) -> None:
    _, raw = make_token(world.team)
    new = {"slug": "agent", "name": "Agent", "budget": {"p95": 8000}}
    response = bearer(raw).post("/api/v1/pipelines/?team=acme", new, format="json")
    assert response.status_code == 401
    assert not world.team.pipelines.exists()


def test_an_ingest_token_does_not_ride_on_a_signed_in_session(world: TeamWorld) -> None:
    _, raw = make_token(world.team)
    client = bearer(raw)
    client.force_login(world.owner)
    response = client.get("/api/v1/teams/")
    assert response.status_code == 401
    assert response.json()["error"]["message"] == INGEST_ONLY


def test_a_personal_api_token_still_reads(world: TeamWorld) -> None:
    _, raw = api_token_create(user=world.owner, name="personal")
    response = bearer(raw).get("/api/v1/teams/")
    assert response.status_code == 200
    assert [team["slug"] for team in response.json()["results"]] == ["acme"]


# --- Command line -------------------------------------------------------------------------------


def test_cli_prints_the_token_alone_on_the_last_line(world: TeamWorld) -> None:
    out = run("ingest_token", "create", "--team", "acme", "--name", "prod collector")
    raw = out.strip().splitlines()[-1]
    token = IngestToken.objects.get()
    assert raw.startswith("lbi_")
    assert token.team == world.team
    assert token.name == "prod collector"
    assert token.created_by is None
    assert token.digest == token_digest(raw)
    assert ingest_token_authenticate(raw=raw) == token


def test_cli_names_the_token_by_default(world: TeamWorld) -> None:
    run("ingest_token", "create", "--team", "acme")
    assert IngestToken.objects.get().name == "CLI ingest token"


def test_cli_on_an_unknown_team_fails_clearly(world: TeamWorld) -> None:
    with pytest.raises(CommandError, match="No team with the slug “nope”"):
        run("ingest_token", "create", "--team", "nope")
    assert not IngestToken.objects.exists()


def test_cli_with_an_overlong_name_fails_clearly(world: TeamWorld) -> None:
    with pytest.raises(CommandError, match="Cannot create the token"):
        run("ingest_token", "create", "--team", "acme", "--name", "n" * 101)
    assert not IngestToken.objects.exists()


def test_cli_requires_a_team(world: TeamWorld) -> None:
    with pytest.raises(CommandError, match="--team"):
        run("ingest_token", "create")


def test_cli_without_an_action_is_a_usage_error(world: TeamWorld) -> None:
    with pytest.raises(CommandError, match="required"):
        run("ingest_token")


# --- Admin --------------------------------------------------------------------------------------


@pytest.fixture
def admin_client(world: TeamWorld) -> Client:
    admin = make_user("root", is_staff=True, is_superuser=True)
    return client_for(admin)


def test_admin_lists_and_shows_tokens_without_their_value(
    world: TeamWorld, admin_client: Client
) -> None:
    token, raw = ingest_token_create(team=world.team, name="prod", created_by=world.owner)
    listing = admin_client.get("/admin/teams/ingesttoken/")
    assert listing.status_code == 200
    assert "prod" in listing.content.decode()
    assert token.prefix in listing.content.decode()
    detail = admin_client.get(f"/admin/teams/ingesttoken/{token.pk}/change/")
    assert detail.status_code == 200
    body = detail.content.decode()
    assert raw not in body
    assert 'name="digest"' not in body


def test_admin_can_revoke_by_setting_the_time(world: TeamWorld, admin_client: Client) -> None:
    token, raw = make_token(world.team)
    now = timezone.localtime()
    response = admin_client.post(
        f"/admin/teams/ingesttoken/{token.pk}/change/",
        {
            "team": world.team.pk,
            "name": "renamed",
            "revoked_at_0": now.strftime("%Y-%m-%d"),
            "revoked_at_1": now.strftime("%H:%M:%S"),
        },
    )
    assert response.status_code == 302
    token.refresh_from_db()
    assert token.name == "renamed"
    assert token.revoked_at is not None
    assert ingest_token_authenticate(raw=raw) is None


def test_admin_cannot_add_a_token_whose_value_nobody_would_see(admin_client: Client) -> None:
    assert admin_client.get("/admin/teams/ingesttoken/add/").status_code == 403
