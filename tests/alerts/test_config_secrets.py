"""Secrets stay with writers: the configuration file and page give viewers webhook URLs
in the form the channel pages show them, nobody a signing secret, and ``secret_env``
reads the server's environment only on the command line (or for allowed prefixes)."""

import io
import re
from pathlib import Path

import pytest
import yaml
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse
from pytest_django import Settings

from apps.alerts.config_as_code.channels_check import UNREADABLE_ENV
from apps.alerts.models import Channel
from apps.alerts.transports.signing import secret_generate
from apps.alerts.webhook_urls import url_for_viewers
from apps.pipelines.config_as_code import (
    ConfigInvalid,
    config_apply,
    config_export,
    parse_document,
)
from apps.pipelines.environment import COMMAND_LINE
from tests.builders.alerts import email_channel, webhook_channel
from tests.builders.api import token_client
from tests.conftest import TeamWorld, client_for

SLACK = "https://hooks.slack.com/services/T0001/B0002/slacktokenslacktoken"
ALERTMANAGER = "http://am.example.com:9093/api/v2/alerts?token=amtoken"
MISSING = "LB_NO_SUCH_VARIABLE_ANYWHERE"
WRITERS = ["owner", "editor"]


@pytest.fixture
def hooks(world: TeamWorld) -> list[Channel]:
    """Two webhooks whose URLs are their tokens, one with its secret from a variable."""
    return [
        webhook_channel(world.team, "slack", url=SLACK, format="slack"),
        webhook_channel(
            world.team, "am", url=ALERTMANAGER, format="alertmanager", secret_env="AM_SECRET"
        ),
        email_channel(world.team),
    ]


def page_url() -> str:
    return reverse("config:page", kwargs={"team_slug": "acme"})


def download_url() -> str:
    return reverse("config:download", kwargs={"team_slug": "acme"})


def apply_url() -> str:
    return reverse("config:apply", kwargs={"team_slug": "acme"})


def upload(client: Client, text: str) -> tuple[int, str]:
    """Preview a file uploaded on the page; its text is not echoed back, unlike pasted text."""
    document = SimpleUploadedFile("acme.yaml", text.encode(), content_type="text/yaml")
    response = client.post(page_url(), {"file": document})
    return response.status_code, response.content.decode()


def upload_and_apply(client: Client, text: str) -> str:
    status, body = upload(client, text)
    assert status == 200, body
    match = re.search(r'name="token" value="([^"]+)"', body)
    assert match, "the preview offers no Apply button"
    return client.post(apply_url(), {"token": match.group(1)}, follow=True).content.decode()


def current_yaml(body: str) -> str:
    match = re.search(r'<pre class="current-yaml">(.*?)</pre>', body, re.S)
    assert match
    return match.group(1).replace("&#x27;", "'").replace("&quot;", '"').replace("&amp;", "&")


def exported_channels(text: str) -> dict[str, dict[str, object]]:
    return {channel["slug"]: channel for channel in yaml.safe_load(text)["channels"]}


def secret_file(variable: str, slug: str = "hook") -> str:
    return (
        "team: acme\nchannels:\n"
        f"  - slug: {slug}\n    kind: webhook\n    url: https://hooks.example.com/x\n"
        f"    secret_env: {variable}\n"
    )


# --- What each member reads ---------------------------------------------------------------


def test_a_viewers_download_and_page_hold_only_masked_webhook_urls_and_no_secret(
    world: TeamWorld, hooks: list[Channel]
):
    client = client_for(world.viewer)

    downloaded = client.get(download_url()).content.decode()
    shown = current_yaml(client.get(page_url()).content.decode())

    for text in (downloaded, shown):
        channels = exported_channels(text)
        assert channels["slack"]["url"] == "https://hooks.slack.com/…"
        assert channels["am"]["url"] == "http://am.example.com:9093/…"
        assert channels["team-mail"]["to"] == ["oncall@acme.example.com"]
        for token in ("slacktoken", "amtoken", "/services/", "/api/v2/"):
            assert token not in text
        for hook in hooks:
            assert not hook.secret or hook.secret not in text
        assert "whsec_" not in text


@pytest.mark.parametrize("role", WRITERS)
def test_writers_read_whole_webhook_urls_and_no_secret(
    world: TeamWorld, hooks: list[Channel], role: str
):
    client = client_for(getattr(world, role))

    downloaded = client.get(download_url()).content.decode()
    shown = current_yaml(client.get(page_url()).content.decode())

    for text in (downloaded, shown):
        channels = exported_channels(text)
        assert (channels["slack"]["url"], channels["am"]["url"]) == (SLACK, ALERTMANAGER)
        assert channels["am"]["secret_env"] == "AM_SECRET"
        assert "whsec_" not in text


def test_an_outsider_gets_404_for_the_page_and_the_download(world: TeamWorld, hooks):
    client = client_for(world.outsider)

    assert client.get(page_url()).status_code == 404
    assert client.get(download_url()).status_code == 404


def test_the_command_line_exports_whole_urls_for_the_operator(world: TeamWorld, hooks):
    out = io.StringIO()
    call_command("budgets", "export", "--team", "acme", stdout=out)

    assert exported_channels(out.getvalue())["slack"]["url"] == SLACK
    assert "whsec_" not in out.getvalue()


# --- Applying what was exported --------------------------------------------------------------


@pytest.mark.parametrize("role", WRITERS)
def test_a_writers_export_applied_in_the_browser_changes_nothing(
    world: TeamWorld, hooks: list[Channel], role: str
):
    client = client_for(getattr(world, role))
    exported = client.get(download_url()).content.decode()
    before = list(Channel.objects.order_by("slug").values())

    status, body = upload(client, exported)

    assert status == 200, body
    assert "No changes." in body
    assert list(Channel.objects.order_by("slug").values()) == before


def test_a_viewers_export_applied_by_a_writer_keeps_the_stored_urls(
    world: TeamWorld, hooks: list[Channel]
):
    exported = client_for(world.viewer).get(download_url()).content.decode()
    renamed = exported.replace("- slug: slack\n", "- slug: slack\n    name: Slack\n")

    _, unchanged = upload(client_for(world.owner), exported)
    applied = upload_and_apply(client_for(world.owner), renamed)

    assert "No changes." in unchanged
    assert "Applied 1 change." in applied
    slack = Channel.objects.get(team=world.team, slug="slack")
    assert (slack.name, slack.url) == ("Slack", SLACK)
    assert Channel.objects.get(team=world.team, slug="am").url == ALERTMANAGER


@pytest.mark.parametrize(
    ("slug", "url"),
    [
        ("slack", "https://hooks.example.org/…"),  # another host's form
        ("slack", "http://hooks.slack.com/…"),  # another scheme's form
        ("new-hook", "https://hooks.slack.com/…"),  # no stored URL to keep
    ],
)
def test_a_masked_url_that_stands_for_no_stored_url_is_refused(
    world: TeamWorld, hooks: list[Channel], slug: str, url: str
):
    text = f"team: acme\nchannels:\n  - slug: {slug}\n    kind: webhook\n    url: {url}\n"
    before = list(Channel.objects.order_by("slug").values())

    status, body = upload(client_for(world.owner), text)

    assert status == 422
    assert (
        f"Line 5: “{url}” is a webhook URL with its path hidden, as viewers see it, and it is "
        "not this channel&#x27;s stored URL in that form: write the whole URL."
    ) in body
    assert list(Channel.objects.order_by("slug").values()) == before


def test_the_mask_is_the_one_the_channel_pages_use(world: TeamWorld, hooks: list[Channel]):
    exported = exported_channels(config_export(team=world.team))

    assert exported["slack"]["url"] == url_for_viewers(SLACK)


# --- secret_env -----------------------------------------------------------------------------


def _without_csrf(body: str) -> str:
    body = re.sub(r'name="csrfmiddlewaretoken" value="[^"]+"', "", body)
    return re.sub(r'"X-CSRFToken": "[^"]+"', "", body)


def test_secret_env_from_the_browser_is_refused_alike_for_path_and_a_missing_variable(
    world: TeamWorld, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.delenv(MISSING, raising=False)
    client = client_for(world.owner)

    answers = [upload(client, secret_file(name)) for name in ("PATH", MISSING)]

    (path_status, path_body), (missing_status, missing_body) = answers
    assert path_status == missing_status == 422
    assert f"Line 6: {UNREADABLE_ENV}".replace("'", "&#x27;") in path_body
    assert _without_csrf(path_body) == _without_csrf(missing_body)
    assert not Channel.objects.exists()


@pytest.mark.parametrize("variable", ["PATH", MISSING])
def test_secret_env_through_the_api_is_refused_alike(world: TeamWorld, variable: str):
    api = token_client(world.owner)
    body = {"slug": "hook", "kind": "webhook", "url": "https://hooks.example.com/x"}

    created = api.post("/api/v1/channels/", {**body, "secret_env": variable}, format="json")

    assert created.status_code == 400
    assert variable not in created.content.decode()
    assert created.json()["error"]["fields"] == {"secret_env": ["Unknown field."]}
    assert not Channel.objects.exists()


def test_the_command_line_still_reads_any_variable(
    world: TeamWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    secret = secret_generate()
    monkeypatch.setenv("HOOK_SIGNING_SECRET", secret)
    path = tmp_path / "acme.yaml"

    path.write_text(secret_file("PATH"))
    with pytest.raises(CommandError):
        call_command("budgets", "apply", str(path), stdout=io.StringIO(), stderr=io.StringIO())
    path.write_text(secret_file("HOOK_SIGNING_SECRET"))
    call_command("budgets", "apply", str(path), stdout=io.StringIO(), stderr=io.StringIO())

    hook = Channel.objects.get(team=world.team, slug="hook")
    assert (hook.secret, hook.secret_env) == (secret, "HOOK_SIGNING_SECRET")


def test_the_command_line_tells_what_path_holds(world: TeamWorld):
    with pytest.raises(ConfigInvalid) as caught:
        parse_document(secret_file("PATH"), environment=COMMAND_LINE)

    assert "“PATH” does not hold a signing secret" in str(caught.value)


def test_an_allowed_prefix_is_read_from_the_browser(
    world: TeamWorld, settings: Settings, monkeypatch: pytest.MonkeyPatch
):
    settings.CONFIG_SECRET_ENV_PREFIXES = ["LB_ACME_", "globex=LB_GLOBEX_"]
    secret = secret_generate()
    monkeypatch.setenv("LB_ACME_HOOK", secret)
    monkeypatch.setenv("LB_GLOBEX_HOOK", secret_generate())
    client = client_for(world.editor)

    applied = upload_and_apply(client, secret_file("LB_ACME_HOOK"))
    status, refused = upload(client, secret_file("LB_GLOBEX_HOOK", slug="other"))

    assert "Applied 1 change." in applied
    assert Channel.objects.get(team=world.team, slug="hook").secret == secret
    # Another team's prefix is not this team's.
    assert status == 422
    assert UNREADABLE_ENV.replace("'", "&#x27;") in refused
    assert not Channel.objects.filter(slug="other").exists()


def test_a_secret_env_the_channel_already_has_is_kept_without_reading_it(
    world: TeamWorld, hooks: list[Channel], monkeypatch: pytest.MonkeyPatch
):
    am = Channel.objects.get(team=world.team, slug="am")
    monkeypatch.setenv("AM_SECRET", secret_generate())  # would change the secret if read
    exported = config_export(team=world.team, masked=False)

    _, body = upload(client_for(world.owner), exported)
    plan = config_apply(document=parse_document(exported), dry_run=True)

    assert "No changes." in body
    assert plan.changes == []
    assert Channel.objects.get(pk=am.pk).secret == am.secret
