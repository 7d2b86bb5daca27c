"""A webhook URL is judged at save by the rule its sends follow, whatever the door.

``http://127.0.0.1:9911`` is refused by the form, the API and a configuration file
while the server allows no private address, with the setting that would allow it and
that it is a server setting read at start; once allowed, for one team or every one, it
saves and the real receiver gets what is sent. A host that does not resolve now saves
with a warning, within a bounded lookup.
"""

import re
import socket
import time
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse
from pytest_django import Settings

from apps.alerts.models import Channel, ChannelKind
from apps.alerts.services.channels import channel_create, channel_update
from apps.alerts.services.delivery import notification_deliver
from apps.alerts.services.notifications import notification_test_send
from apps.alerts.services.webhook_targets import SAVE_RESOLVE_TIMEOUT_S
from apps.pipelines.config_as_code import ConfigInvalid, config_apply, parse_document
from apps.pipelines.environment import COMMAND_LINE
from tests.alerts.receivers import HttpReceiver
from tests.builders.alerts import NOW, webhook_channel
from tests.builders.api import error_of, token_client
from tests.conftest import TeamWorld, client_for

LOCAL = "http://127.0.0.1:9911/hook"
CHANNELS = "/api/v1/channels/"
# A name that never resolves (RFC 6761), whatever the network.
NOWHERE = "https://alerts.nowhere.invalid/hook"


def form_url(team: str = "acme", **kwargs: Any) -> str:
    if "channel_slug" in kwargs:
        return reverse("alerts:channel_edit", kwargs={"team_slug": team, **kwargs})
    return reverse("alerts:channel_create", kwargs={"team_slug": team, "kind": "webhook"})


def says_how_to_allow(message: str, entry: str) -> None:
    assert "loopback address, which webhooks may not reach" in message
    assert f"add {entry} to WEBHOOK_ALLOWED_HOSTS" in message
    assert "set WEBHOOK_ALLOW_PRIVATE_IPS=true" in message
    assert "server setting" in message
    assert "restart them" in message


# --- the service, which every door calls


@pytest.mark.parametrize(
    "url",
    [
        LOCAL,
        "http://localhost:9911/hook",  # a name resolving to loopback
        "http://[::1]:9911/hook",
        "http://[::ffff:127.0.0.1]:9911/hook",
        "http://0.0.0.0:9911/hook",
        "http://169.254.169.254/latest/meta-data/",
        "http://10.1.2.3/hook",
    ],
)
def test_an_address_a_send_would_refuse_is_refused_at_save(world: TeamWorld, url: str) -> None:
    with pytest.raises(ValidationError) as refused:
        channel_create(team=world.team, slug="local", kind=ChannelKind.WEBHOOK, url=url)
    (message,) = refused.value.message_dict["url"]
    assert "which webhooks may not reach" in message
    assert "WEBHOOK_ALLOWED_HOSTS" in message
    assert "WEBHOOK_ALLOW_PRIVATE_IPS=true" in message
    assert not Channel.objects.filter(slug="local").exists()


def test_the_refusal_names_this_teams_entry_and_the_restart(world: TeamWorld) -> None:
    with pytest.raises(ValidationError) as refused:
        channel_create(team=world.team, slug="local", kind=ChannelKind.WEBHOOK, url=LOCAL)
    (message,) = refused.value.message_dict["url"]
    says_how_to_allow(message, "acme=http://127.0.0.1:9911")
    assert message.startswith("127.0.0.1 is a loopback address")


def test_a_teams_entry_lets_that_team_save_it_and_no_other(
    world: TeamWorld, settings: Settings
) -> None:
    settings.WEBHOOK_ALLOWED_HOSTS = ["acme=http://127.0.0.1:9911"]
    saved = channel_create(team=world.team, slug="local", kind=ChannelKind.WEBHOOK, url=LOCAL)
    assert (saved.url, saved.url_warning) == (LOCAL, "")
    with pytest.raises(ValidationError, match=re.escape("globex=http://127.0.0.1:9911")):
        channel_create(team=world.other_team, slug="local", kind=ChannelKind.WEBHOOK, url=LOCAL)
    # Another port of the same address is another receiver.
    with pytest.raises(ValidationError, match=re.escape("acme=http://127.0.0.1:9912")):
        channel_update(channel=saved, url="http://127.0.0.1:9912/hook")


def test_allowing_every_private_address_lets_any_team_save_it(
    world: TeamWorld, settings: Settings
) -> None:
    settings.WEBHOOK_ALLOW_PRIVATE_IPS = True
    for team in (world.team, world.other_team):
        channel_create(team=team, slug="local", kind=ChannelKind.WEBHOOK, url=LOCAL)
    assert Channel.objects.filter(slug="local").count() == 2


def test_a_url_saved_while_allowed_is_not_checked_again_by_a_change_elsewhere(
    world: TeamWorld, settings: Settings
) -> None:
    settings.WEBHOOK_ALLOW_PRIVATE_IPS = True
    saved = channel_create(team=world.team, slug="local", kind=ChannelKind.WEBHOOK, url=LOCAL)
    settings.WEBHOOK_ALLOW_PRIVATE_IPS = False
    renamed = channel_update(channel=saved, name="Local receiver", url=LOCAL)
    assert renamed.name == "Local receiver"
    with pytest.raises(ValidationError):
        channel_update(channel=renamed, url="http://127.0.0.1:9911/other")


def test_a_host_that_does_not_resolve_saves_with_a_warning(world: TeamWorld) -> None:
    saved = channel_create(team=world.team, slug="later", kind=ChannelKind.WEBHOOK, url=NOWHERE)
    assert saved.pk is not None
    assert saved.url_warning.startswith(
        "The webhook's host does not resolve now (could not resolve alerts.nowhere.invalid"
    )
    assert "sends to it fail and are retried" in saved.url_warning


def test_a_slow_name_server_holds_the_save_no_longer_than_the_bound(
    world: TeamWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    def stalled(*args: Any, **kwargs: Any) -> Any:
        time.sleep(SAVE_RESOLVE_TIMEOUT_S + 3)
        raise socket.gaierror("too late")

    monkeypatch.setattr(socket, "getaddrinfo", stalled)
    started = time.monotonic()
    saved = channel_create(
        team=world.team, slug="slow", kind=ChannelKind.WEBHOOK, url="https://slow.example.com/"
    )
    assert time.monotonic() - started < SAVE_RESOLVE_TIMEOUT_S + 1
    assert "resolving slow.example.com timed out" in saved.url_warning


def test_an_allowed_local_receiver_gets_the_test_it_is_sent(
    world: TeamWorld, settings: Settings, http_receiver: HttpReceiver
) -> None:
    settings.WEBHOOK_ALLOWED_HOSTS = [f"acme=http://127.0.0.1:{http_receiver.port}"]
    hook = webhook_channel(world.team, url=http_receiver.url())
    result = notification_deliver(
        notification_id=notification_test_send(channel=hook, now=NOW).pk, now=NOW
    )
    assert result.outcome == "success"
    assert len(http_receiver.requests) == 1


# --- the form


@pytest.mark.parametrize("role", ["owner", "editor"])
def test_the_form_refuses_a_loopback_url_naming_the_setting(world: TeamWorld, role: str) -> None:
    response = client_for(getattr(world, role)).post(
        form_url(), {"slug": "local", "url": LOCAL, "format": "native"}
    )
    assert response.status_code == 422
    html = response.content.decode()
    # On the URL's own field, not above the form.
    url_field = html.split('<label for="id_url"')[1].split('<label for="id_format"')[0]
    says_how_to_allow(url_field, "acme=http://127.0.0.1:9911")
    assert not Channel.objects.filter(slug="local").exists()


def test_viewers_and_outsiders_cannot_post_the_form(world: TeamWorld) -> None:
    data = {"slug": "local", "url": LOCAL, "format": "native"}
    assert client_for(world.viewer).post(form_url(), data).status_code == 403
    assert client_for(world.outsider).post(form_url(), data).status_code == 404
    assert not Channel.objects.filter(slug="local").exists()


def test_the_edit_form_refuses_a_new_loopback_url(world: TeamWorld) -> None:
    hook = webhook_channel(world.team, url="https://hooks.example.com/x")
    response = client_for(world.editor).post(
        form_url(channel_slug=hook.slug), {"url": LOCAL, "format": "native"}
    )
    assert response.status_code == 422
    assert "WEBHOOK_ALLOW_PRIVATE_IPS=true" in response.content.decode()
    hook.refresh_from_db()
    assert hook.url == "https://hooks.example.com/x"


def test_the_form_saves_an_unresolvable_host_and_warns(world: TeamWorld) -> None:
    client = client_for(world.owner)
    response = client.post(form_url(), {"slug": "later", "url": NOWHERE, "format": "native"})
    assert response.status_code == 302
    page = client.get(response["Location"]).content.decode()
    assert "Saved, but note: The webhook&#x27;s host does not resolve now" in page


# --- the API


def test_the_api_refuses_a_loopback_url_on_its_field(world: TeamWorld) -> None:
    response = token_client(world.owner).post(
        CHANNELS + "?team=acme", {"slug": "local", "kind": "webhook", "url": LOCAL}, format="json"
    )
    assert response.status_code == 400
    error = error_of(response)
    (message,) = error["fields"]["url"]
    says_how_to_allow(message, "acme=http://127.0.0.1:9911")
    assert not Channel.objects.filter(slug="local").exists()


def test_the_api_refuses_a_change_to_a_loopback_url(world: TeamWorld) -> None:
    hook = webhook_channel(world.team, url="https://hooks.example.com/x")
    response = token_client(world.editor).patch(
        f"{CHANNELS}{hook.slug}/?team=acme", {"url": LOCAL}, format="json"
    )
    assert response.status_code == 400
    assert "url" in error_of(response)["fields"]
    hook.refresh_from_db()
    assert hook.url == "https://hooks.example.com/x"


def test_the_api_saves_an_unresolvable_host_with_a_warning(world: TeamWorld) -> None:
    api = token_client(world.owner)
    created = api.post(
        CHANNELS + "?team=acme", {"slug": "later", "kind": "webhook", "url": NOWHERE}, format="json"
    )
    assert created.status_code == 201
    (warning,) = created.json()["warnings"]
    assert "does not resolve now" in warning
    changed = api.patch(f"{CHANNELS}later/?team=acme", {"name": "Later"}, format="json")
    assert (changed.status_code, changed.json()["warnings"]) == (200, [])


def test_viewers_and_outsiders_cannot_make_a_webhook_through_the_api(world: TeamWorld) -> None:
    body = {"slug": "local", "kind": "webhook", "url": LOCAL}
    for user, status in ((world.viewer, 403), (world.outsider, 404)):
        response = token_client(user).post(CHANNELS + "?team=acme", body, format="json")
        assert response.status_code == status


# --- a configuration file


def _file(url: str) -> str:
    return f"team: acme\nchannels:\n  - slug: local\n    kind: webhook\n    url: {url}\n"


def test_a_file_with_a_loopback_url_is_refused_at_the_urls_line(world: TeamWorld) -> None:
    with pytest.raises(ConfigInvalid) as refused:
        config_apply(document=parse_document(_file(LOCAL), environment=COMMAND_LINE))
    (error,) = refused.value.errors
    assert error.line == 5
    says_how_to_allow(error.message, "acme=http://127.0.0.1:9911")
    assert not Channel.objects.filter(slug="local").exists()


def test_a_file_applies_a_loopback_url_the_server_allows(
    world: TeamWorld, settings: Settings
) -> None:
    settings.WEBHOOK_ALLOWED_HOSTS = ["acme=http://127.0.0.1:9911"]
    plan = config_apply(document=parse_document(_file(LOCAL), environment=COMMAND_LINE))
    assert plan.render() == ["+ channel local"]
    assert Channel.objects.get(team=world.team, slug="local").url == LOCAL


def test_a_file_with_an_unresolvable_host_applies_with_a_note(world: TeamWorld) -> None:
    plan = config_apply(document=parse_document(_file(NOWHERE), environment=COMMAND_LINE))
    changes, note = plan.render()
    assert changes == "+ channel local"
    assert note.startswith("! line 5: channel local: The webhook's host does not resolve now")
    assert Channel.objects.filter(team=world.team, slug="local").exists()


def test_a_file_that_creates_its_team_is_checked_when_applied(world: TeamWorld) -> None:
    text = _file(LOCAL).replace("team: acme", "team: newcomers")
    with pytest.raises(Exception, match="WEBHOOK_ALLOWED_HOSTS") as refused:
        config_apply(document=parse_document(text, environment=COMMAND_LINE), create_team=True)
    assert "newcomers=http://127.0.0.1:9911" in str(refused.value)
    assert not Channel.objects.filter(slug="local").exists()
