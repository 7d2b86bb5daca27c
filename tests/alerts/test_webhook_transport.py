"""Webhook deliveries to a real receiver: signed, classified, bounded in time and size."""

import json
import socket
import time
from collections.abc import Iterator

import pytest
from pytest_django import Settings
from standardwebhooks.webhooks import Webhook

from apps.alerts.models import Channel, ChannelKind, WebhookFormat
from apps.alerts.services.channels import channel_create
from apps.alerts.transports import transport_for
from apps.alerts.transports.base import Delivered, TransportError
from apps.alerts.transports.guarded_http import guarded_post
from apps.alerts.transports.webhook import USER_AGENT, WebhookTransport
from tests.alerts.receivers import HttpReceiver, Reply
from tests.builders.deliveries import firing_payload, notification_for
from tests.conftest import TeamWorld

pytestmark = pytest.mark.usefixtures("allow_loopback")


@pytest.fixture
def channel(world: TeamWorld, http_receiver: HttpReceiver) -> Channel:
    return channel_create(
        team=world.team, slug="oncall", kind=ChannelKind.WEBHOOK, url=http_receiver.url()
    )


def _send(channel: Channel, *, timestamp: int | None = None) -> Delivered:
    notification = notification_for(channel)
    return WebhookTransport().notify(
        channel=channel, notification=notification, timestamp=timestamp or int(time.time())
    )


def _failure(channel: Channel) -> TransportError:
    with pytest.raises(TransportError) as failed:
        _send(channel)
    return failed.value


def test_the_registry_gives_the_webhook_transport(channel: Channel) -> None:
    assert isinstance(transport_for(channel), WebhookTransport)


def test_a_2xx_is_delivered_with_its_status_and_excerpt(
    channel: Channel, http_receiver: HttpReceiver
) -> None:
    http_receiver.script(Reply(202, b'{"accepted": true}'))
    assert _send(channel) == Delivered(http_status=202, excerpt='{"accepted": true}')


def test_the_receiver_can_verify_the_signature(
    channel: Channel, http_receiver: HttpReceiver
) -> None:
    notification = notification_for(channel)
    WebhookTransport().notify(
        channel=channel, notification=notification, timestamp=int(time.time())
    )
    (request,) = http_receiver.requests
    assert request.method == "POST"
    assert request.path == "/hook"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["user-agent"] == USER_AGENT == "LatencyBudgets-Webhook/1"
    assert request.headers["webhook-id"] == notification.message_id
    verified = Webhook(channel.secret).verify(request.body, request.headers)
    assert verified == notification.payload
    assert verified["id"] == notification.message_id


def test_the_webhook_id_is_the_same_on_every_attempt_and_the_timestamp_is_the_attempts(
    channel: Channel, http_receiver: HttpReceiver
) -> None:
    notification = notification_for(channel)
    now = int(time.time())
    for timestamp in (now - 30, now):
        WebhookTransport().notify(channel=channel, notification=notification, timestamp=timestamp)
    first, second = http_receiver.requests
    assert first.headers["webhook-id"] == second.headers["webhook-id"] == notification.message_id
    assert (first.headers["webhook-timestamp"], second.headers["webhook-timestamp"]) == (
        str(now - 30),
        str(now),
    )
    assert first.body == second.body
    for request in (first, second):
        Webhook(channel.secret).verify(request.body, request.headers)


def test_a_channel_without_a_secret_sends_the_id_and_timestamp_unsigned(
    channel: Channel, http_receiver: HttpReceiver
) -> None:
    Channel.objects.filter(pk=channel.pk).update(secret="")
    channel.refresh_from_db()
    _send(channel, timestamp=1700000000)
    headers = http_receiver.requests[0].headers
    assert headers["webhook-timestamp"] == "1700000000"
    assert "webhook-id" in headers
    assert "webhook-signature" not in headers


@pytest.mark.parametrize(
    ("fmt", "key", "expected"),
    [
        (WebhookFormat.ALERTMANAGER, "version", "4"),
        (
            WebhookFormat.SLACK,
            "text",
            "CRITICAL: rag-chat · stage retrieval p95 812.4 ms &gt; 500 ms budget",
        ),
    ],
)
def test_the_body_is_in_the_channels_format(
    world: TeamWorld, http_receiver: HttpReceiver, fmt: str, key: str, expected: str
) -> None:
    channel = channel_create(
        team=world.team, slug=fmt, kind=ChannelKind.WEBHOOK, url=http_receiver.url(), format=fmt
    )
    _send(channel)
    request = http_receiver.requests[0]
    assert request.headers["content-type"] == "application/json"
    body = Webhook(channel.secret).verify(request.body, request.headers)
    assert body[key] == expected


@pytest.mark.parametrize("status", [500, 502, 503, 408, 429])
def test_busy_or_failing_receivers_are_retried(
    channel: Channel, http_receiver: HttpReceiver, status: int
) -> None:
    http_receiver.script(Reply(status, b"upstream is down"))
    error = _failure(channel)
    assert not error.permanent
    assert not error.disable
    assert (error.http_status, error.excerpt) == (status, "upstream is down")
    assert f"HTTP {status}" in str(error)


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_other_4xx_are_permanent(
    channel: Channel, http_receiver: HttpReceiver, status: int
) -> None:
    http_receiver.script(Reply(status, b"no such hook"))
    error = _failure(channel)
    assert error.permanent
    assert not error.disable
    assert (error.http_status, error.excerpt) == (status, "no such hook")


def test_410_is_permanent_and_disables_the_channel(
    channel: Channel, http_receiver: HttpReceiver
) -> None:
    http_receiver.script(Reply(410, b"gone"))
    error = _failure(channel)
    assert error.permanent
    assert error.disable
    assert error.http_status == 410


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_a_redirect_is_permanent_and_not_followed(
    channel: Channel, http_receiver: HttpReceiver, status: int
) -> None:
    elsewhere = http_receiver.url("/elsewhere")
    http_receiver.script(Reply(status, b"moved", location=elsewhere))
    error = _failure(channel)
    assert error.permanent
    assert error.http_status == status
    assert elsewhere in str(error)
    assert [r.path for r in http_receiver.requests] == ["/hook"]
    assert http_receiver.connections == 1


def test_a_slow_receiver_times_out_within_the_setting(
    channel: Channel, http_receiver: HttpReceiver, settings: Settings
) -> None:
    settings.WEBHOOK_TIMEOUT_S = 0.5
    http_receiver.script(Reply(200, delay_s=5))
    started = time.monotonic()
    error = _failure(channel)
    assert time.monotonic() - started < 1.5
    assert not error.permanent
    assert "0.5 s" in str(error)


def test_a_receiver_that_drips_its_answer_is_cut_off_at_the_total_timeout(
    channel: Channel, http_receiver: HttpReceiver, settings: Settings
) -> None:
    # Each byte comes well within any per-read timeout; only the total bounds it.
    settings.WEBHOOK_TIMEOUT_S = 0.6
    http_receiver.script(Reply(200, b"x" * 200, drip_interval_s=0.05))
    started = time.monotonic()
    error = _failure(channel)
    assert time.monotonic() - started < 1.6
    assert not error.permanent


def test_a_huge_answer_is_read_only_up_to_the_cap(
    http_receiver: HttpReceiver, settings: Settings
) -> None:
    settings.WEBHOOK_MAX_RESPONSE_BYTES = 65536
    http_receiver.script(Reply(200, stream_bytes=10 * 1024 * 1024))
    answer = guarded_post(http_receiver.url(), body=b"{}", headers={})
    assert answer.status == 200
    assert answer.bytes_read == 65536
    assert answer.excerpt == "x" * 1000


def test_an_endless_answer_does_not_hold_the_worker(
    channel: Channel, http_receiver: HttpReceiver
) -> None:
    http_receiver.script(Reply(200, stream_bytes=8 * 1024**3))
    started = time.monotonic()
    delivered = _send(channel)
    assert time.monotonic() - started < 3
    assert delivered.http_status == 200
    assert len(delivered.excerpt) == 1000
    # The receiver stopped once we hung up, far short of the 8 GiB it meant to send.
    time.sleep(0.2)
    assert http_receiver.bytes_sent < 256 * 1024**2


def test_a_body_that_is_not_utf8_is_kept_with_replacement_characters(
    channel: Channel, http_receiver: HttpReceiver
) -> None:
    http_receiver.script(Reply(500, b"\xff\xfe fail \xe2\x82"))
    assert _failure(channel).excerpt == "\ufffd\ufffd fail \ufffd"


@pytest.fixture
def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_refused_connection_is_retried(world: TeamWorld, closed_port: int) -> None:
    channel = channel_create(
        team=world.team,
        slug="nobody-home",
        kind=ChannelKind.WEBHOOK,
        url=f"http://127.0.0.1:{closed_port}/hook",
    )
    error = _failure(channel)
    assert not error.permanent
    assert "could not connect" in str(error)


@pytest.fixture
def unanswered_listener() -> Iterator[int]:
    """A port whose accept queue is full, so that a new connection is never completed."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = int(listener.getsockname()[1])
    fillers = []
    for _ in range(3):
        filler = socket.socket()
        filler.setblocking(False)
        filler.connect_ex(("127.0.0.1", port))
        fillers.append(filler)
    time.sleep(0.05)
    yield port
    for filler in fillers:
        filler.close()
    listener.close()


def test_a_connection_that_is_never_accepted_times_out_at_the_connect_timeout(
    world: TeamWorld, unanswered_listener: int, settings: Settings
) -> None:
    settings.WEBHOOK_CONNECT_TIMEOUT_S = 0.3
    channel = channel_create(
        team=world.team,
        slug="backlog",
        kind=ChannelKind.WEBHOOK,
        url=f"http://127.0.0.1:{unanswered_listener}/hook",
    )
    started = time.monotonic()
    error = _failure(channel)
    assert time.monotonic() - started < 1.5
    assert not error.permanent
    assert "timed out" in str(error)


def test_credentials_in_the_url_are_sent_as_basic_auth(
    world: TeamWorld, http_receiver: HttpReceiver
) -> None:
    channel = channel_create(
        team=world.team,
        slug="with-auth",
        kind=ChannelKind.WEBHOOK,
        url=f"http://alert:s3cret@127.0.0.1:{http_receiver.port}/hook?team=acme",
    )
    _send(channel)
    request = http_receiver.requests[0]
    assert request.path == "/hook?team=acme"
    assert request.headers["authorization"] == "Basic YWxlcnQ6czNjcmV0"


def test_the_native_body_is_the_payload_as_compact_utf8_json(
    channel: Channel, http_receiver: HttpReceiver
) -> None:
    payload = firing_payload(pipeline={"slug": "rag-chat", "name": "Chat · réponse"})
    notification = notification_for(channel, payload)
    WebhookTransport().notify(channel=channel, notification=notification, timestamp=1700000000)
    body = http_receiver.requests[0].body
    assert json.loads(body) == notification.payload
    assert "Chat · réponse".encode() in body
    assert b": " not in body
    assert b", " not in body
