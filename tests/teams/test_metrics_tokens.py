"""A team's metrics tokens: the page that makes them and says how to scrape, who may do
what there, the cap per account, and revoking."""

from typing import Any

import pytest
from django.conf import settings
from django.test import Client

from apps.teams.models import MetricsToken, Team
from apps.teams.services import (
    metrics_token_authenticate,
    metrics_token_create,
    metrics_token_revoke,
)
from apps.teams.tokens import token_digest
from tests.builders.configuration import make_team
from tests.conftest import TeamWorld, client_for
from tests.teams.conftest import HTMX, assert_redirects_to_login

URL = "/teams/acme/metrics/"


def revoke_url(token: MetricsToken, team_slug: str = "acme") -> str:
    return f"/teams/{team_slug}/metrics/{token.pk}/revoke/"


def make_token(team: Team, name: str = "prometheus") -> tuple[MetricsToken, str]:
    return metrics_token_create(team=team, name=name, created_by=None)


def test_a_token_is_stored_only_as_a_digest_with_its_own_prefix(world: TeamWorld) -> None:
    token, raw = make_token(world.team)
    assert raw.startswith("lbm_")
    assert token.digest == token_digest(raw)
    row = MetricsToken.objects.filter(pk=token.pk).values().get()
    assert all(raw not in str(value) for value in row.values())
    assert metrics_token_authenticate(raw=raw) == token


# --- Who sees the page --------------------------------------------------------------------------


def test_anonymous_is_sent_to_login(world: TeamWorld) -> None:
    assert_redirects_to_login(Client().get(URL), URL)
    assert_redirects_to_login(Client().post(URL, {"name": "x"}), URL)
    assert not MetricsToken.objects.exists()


@pytest.mark.parametrize("role", ["owner", "editor", "viewer"])
def test_members_see_the_teams_tokens_and_how_to_scrape(world: TeamWorld, role: str) -> None:
    mine, _ = metrics_token_create(team=world.team, name="prod prometheus", created_by=world.editor)
    theirs, _ = make_token(world.other_team, "globex prometheus")
    response = client_for(getattr(world, role)).get(URL)
    assert response.status_code == 200
    assert list(response.context["tokens"]) == [mine]
    body = response.content.decode()
    assert "prod prometheus" in body
    assert mine.prefix in body
    assert theirs.prefix not in body
    assert "globex prometheus" not in body
    # The scrape job to paste, for this site and team.
    assert f"{settings.SITE_URL}/metrics" in body
    assert "job_name: latency-budgets-acme" in body
    assert "credentials_file: /etc/prometheus/latency-budgets-acme.token" in body
    assert "latency_budget_stage_duration_seconds" in body


def test_viewer_sees_no_create_form_or_revoke_button(world: TeamWorld) -> None:
    token, _ = make_token(world.team)
    response = client_for(world.viewer).get(URL)
    body = response.content.decode()
    assert response.context["form"] is None
    assert "Create metrics token" not in body
    assert revoke_url(token) not in body


def test_outsider_gets_404(world: TeamWorld) -> None:
    client = client_for(world.outsider)
    assert client.get(URL).status_code == 404
    assert client.post(URL, {"name": "sneaky"}).status_code == 404
    assert not MetricsToken.objects.exists()


def test_the_team_nav_and_the_api_tokens_page_link_to_it(world: TeamWorld) -> None:
    members = client_for(world.viewer).get("/teams/acme/members/").content.decode()
    assert f'href="{URL}"' in members
    tokens = client_for(world.outsider).get("/teams/tokens/").content.decode()
    assert 'href="/teams/globex/metrics/"' in tokens
    assert f'href="{URL}"' not in tokens  # only the teams the user is in


# --- Creating ---------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["owner", "editor"])
def test_writer_creates_a_token_shown_once_with_its_scrape_job(world: TeamWorld, role: str) -> None:
    user = getattr(world, role)
    client = client_for(user)
    response = client.post(URL, {"name": "prod prometheus"})
    assert response.status_code == 200
    raw = response.context["new_token"]
    token = MetricsToken.objects.get()
    assert (token.team, token.name, token.created_by) == (world.team, "prod prometheus", user)
    assert token.digest == token_digest(raw)
    body = response.content.decode()
    assert "Copy your new token now" in body
    assert raw in body
    assert "no-store" in response["Cache-Control"]
    again = client.get(URL).content.decode()
    assert raw not in again


def test_viewer_gets_403_on_create(world: TeamWorld) -> None:
    assert client_for(world.viewer).post(URL, {"name": "sneaky"}).status_code == 403
    assert not MetricsToken.objects.exists()


@pytest.mark.parametrize("name", ["", "   ", "n" * 101])
def test_bad_token_name_is_rejected_inline(world: TeamWorld, name: str) -> None:
    response = client_for(world.owner).post(URL, {"name": name})
    assert response.status_code == 200
    assert 'class="errorlist' in response.content.decode()
    assert not MetricsToken.objects.exists()


def test_an_account_at_its_cap_is_told_so(world: TeamWorld, settings: Any) -> None:
    settings.METRICS_TOKENS_PER_ACCOUNT = 2
    second = make_team("acme-labs", owner=world.owner)  # the same account
    make_token(world.team, "a")
    make_token(second, "b")
    response = client_for(world.editor).post(URL, {"name": "c"})
    assert response.status_code == 200
    assert "METRICS_TOKENS_PER_ACCOUNT=2" in response.content.decode()
    assert MetricsToken.objects.filter(team=world.team).count() == 1
    # Another account is not held by it; a revoked token makes room.
    make_token(world.other_team, "theirs")
    metrics_token_revoke(token=MetricsToken.objects.get(name="a"))
    assert client_for(world.editor).post(URL, {"name": "c"}).context["new_token"]


# --- Revoking ---------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["owner", "editor"])
def test_writer_revokes_and_the_token_stops_working(world: TeamWorld, role: str) -> None:
    token, raw = make_token(world.team)
    response = client_for(getattr(world, role)).post(revoke_url(token))
    assert response.status_code == 302
    assert response["Location"] == URL
    assert metrics_token_authenticate(raw=raw) is None


def test_revoke_with_htmx_returns_the_table(world: TeamWorld) -> None:
    token, _ = make_token(world.team)
    response = client_for(world.owner).post(revoke_url(token), headers=HTMX)
    body = response.content.decode()
    assert body.lstrip().startswith('<div id="metrics-token-table">')
    assert "revoked" in body


def test_viewer_cannot_revoke_and_outsider_gets_404(world: TeamWorld) -> None:
    token, raw = make_token(world.team)
    assert client_for(world.viewer).post(revoke_url(token)).status_code == 403
    assert client_for(world.outsider).post(revoke_url(token)).status_code == 404
    # Another team's token through this team's URL: not found.
    theirs, their_raw = make_token(world.other_team)
    assert client_for(world.owner).post(revoke_url(theirs)).status_code == 404
    assert metrics_token_authenticate(raw=raw) is not None
    assert metrics_token_authenticate(raw=their_raw) is not None
