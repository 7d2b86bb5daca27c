"""The SSRF guard: internal addresses are refused before any connection, unless allowed."""

import shutil
import ssl
import subprocess
from collections.abc import Iterator
from ipaddress import ip_address
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError
from pytest_django import Settings

from apps.alerts.models import ChannelKind
from apps.alerts.services.channels import channel_create
from apps.alerts.transports.addresses import address_class
from apps.alerts.transports.base import TransportError
from apps.alerts.transports.guarded_http import RequestFailed, RequestRefused, guarded_post
from apps.alerts.transports.webhook import WebhookTransport
from tests.alerts.receivers import HttpReceiver
from tests.builders.deliveries import notification_for
from tests.conftest import TeamWorld

REFUSED_HOSTS = [
    "127.0.0.1",
    "localhost",
    "10.0.0.1",
    "192.168.1.1",
    "169.254.169.254",
    "[::1]",
    "[::ffff:127.0.0.1]",
    "100.64.0.1",
    "0.0.0.0",  # noqa: S104 - a target refused, not an address bound
]


def _post(url: str) -> None:
    guarded_post(url, body=b"{}", headers={"Content-Type": "application/json"})


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("127.0.0.1", "loopback"),
        ("127.8.9.10", "loopback"),
        ("10.0.0.5", "private"),
        ("172.16.3.4", "private"),
        ("192.168.1.1", "private"),
        ("169.254.169.254", "link-local"),
        ("100.64.0.1", "shared (carrier-grade NAT)"),
        ("0.0.0.0", "unspecified"),  # noqa: S104 - classed, not bound
        ("224.0.0.251", "multicast"),
        ("240.0.0.1", "reserved"),
        ("255.255.255.255", "reserved"),
        ("::1", "loopback"),
        ("::", "unspecified"),
        ("fe80::1", "link-local"),
        ("fd12:3456::1", "unique local"),
        ("fec0::1", "site-local"),
        ("ff02::1", "multicast"),
        ("::ffff:127.0.0.1", "IPv4-mapped loopback"),
        ("::ffff:10.1.2.3", "IPv4-mapped private"),
        ("::ffff:169.254.169.254", "IPv4-mapped link-local"),
        ("2002:7f00:1::1", "6to4 loopback"),
        ("2002:a9fe:a9fe::1", "6to4 link-local"),
        ("64:ff9b::a00:1", "NAT64 private"),
        ("64:ff9b::7f00:1", "NAT64 loopback"),
        # Local-use NAT64 (RFC 8215) as a whole, whatever its last 32 bits hold.
        ("64:ff9b:1::a00:1", "local-use NAT64"),
        ("64:ff9b:1::808:808", "local-use NAT64"),
        ("64:ff9b:1:ffff:ffff:ffff:ffff:ffff", "local-use NAT64"),
        ("64:ff9b:1:a0a:101::", "local-use NAT64"),
        # Teredo's IPv4 address is obfuscated and reached through relays.
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo"),
        ("2001:0:4136:e378:8000:63bf:f5ff:fffe", "Teredo"),
        # IPv4-compatible and IPv4-translated forms are deprecated, reserved space.
        ("::7f00:1", "reserved"),
        ("::808:808", "reserved"),
        ("::ffff:0:808:808", "reserved"),
        ("2002:c0a8:101::1", "6to4 private"),
        ("2001:db8::1", "private"),
    ],
)
def test_internal_addresses_are_classed(address: str, expected: str) -> None:
    assert address_class(ip_address(address)) == expected


@pytest.mark.parametrize(
    "address",
    [
        "8.8.8.8",
        "1.1.1.1",
        "2606:4700:4700::1111",
        "::ffff:8.8.8.8",
        "2002:808:808::1",
        "64:ff9b::808:808",
        "64:ff9b::1.1.1.1",
    ],
)
def test_public_addresses_pass(address: str) -> None:
    assert address_class(ip_address(address)) is None


@pytest.mark.parametrize("host", REFUSED_HOSTS)
def test_internal_hosts_are_refused_and_nothing_reaches_the_receiver(
    http_receiver: HttpReceiver, host: str
) -> None:
    with pytest.raises(RequestRefused) as refused:
        _post(http_receiver.url(host=host))
    assert "refused:" in str(refused.value)
    assert "WEBHOOK_ALLOW_PRIVATE_IPS" in str(refused.value)
    assert http_receiver.connections == 0
    assert http_receiver.requests == []


def test_the_refusal_names_the_host_the_address_and_its_class(http_receiver: HttpReceiver) -> None:
    with pytest.raises(RequestRefused) as refused:
        _post(http_receiver.url(host="localhost"))
    assert str(refused.value) == (
        "refused: localhost resolves to 127.0.0.1, a loopback address, which webhooks may "
        "not reach. An operator can allow it with a server setting: add "
        f"http://localhost:{http_receiver.port} to WEBHOOK_ALLOWED_HOSTS (every team), or "
        "set WEBHOOK_ALLOW_PRIVATE_IPS=true (every address, every team); the web and worker "
        "processes read these at start, so restart them after the change."
    )
    with pytest.raises(RequestRefused, match=r"169\.254\.169\.254 is a link-local address"):
        _post("http://169.254.169.254/latest/meta-data/")
    with pytest.raises(RequestRefused, match=r"an IPv4-mapped loopback address"):
        _post(http_receiver.url(host="[::ffff:127.0.0.1]"))


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1", "localhost", "[::ffff:127.0.0.1]", "0.0.0.0"],  # noqa: S104 - targets
)
def test_allow_private_ips_lets_internal_hosts_through(
    http_receiver: HttpReceiver, settings: Settings, host: str
) -> None:
    settings.WEBHOOK_ALLOW_PRIVATE_IPS = True
    answer = guarded_post(http_receiver.url(host=host), body=b"{}", headers={})
    assert answer.status == 200
    assert len(http_receiver.requests) == 1


def test_allow_private_ips_lets_ipv6_loopback_through(
    http_receiver_v6: HttpReceiver, settings: Settings
) -> None:
    settings.WEBHOOK_ALLOW_PRIVATE_IPS = True
    answer = guarded_post(http_receiver_v6.url(), body=b"{}", headers={})
    assert (answer.status, answer.address) == (200, "::1")


def test_an_allowed_host_is_let_through_and_only_that_host(
    http_receiver: HttpReceiver, settings: Settings
) -> None:
    settings.WEBHOOK_ALLOWED_HOSTS = [f"http://localhost:{http_receiver.port}"]
    answer = guarded_post(http_receiver.url(host="localhost"), body=b"{}", headers={})
    assert (answer.status, answer.address) == (200, "127.0.0.1")
    # The socket went to the address that was checked; the Host header kept the name.
    assert http_receiver.requests[0].headers["host"] == f"localhost:{http_receiver.port}"
    with pytest.raises(RequestRefused):
        _post(http_receiver.url(host="127.0.0.1"))
    assert len(http_receiver.requests) == 1


def test_a_teams_entry_lets_that_team_through_and_no_other(
    world: TeamWorld, http_receiver: HttpReceiver, settings: Settings
) -> None:
    settings.WEBHOOK_ALLOWED_HOSTS = [f"acme=http://localhost:{http_receiver.port}"]
    url = http_receiver.url(host="localhost")
    ours = channel_create(team=world.team, slug="am", kind=ChannelKind.WEBHOOK, url=url)
    with pytest.raises(ValidationError, match="globex=http://localhost"):
        channel_create(team=world.other_team, slug="am", kind=ChannelKind.WEBHOOK, url=url)
    # Saved while another entry held; the send checks again.
    settings.WEBHOOK_ALLOWED_HOSTS += [f"globex=http://localhost:{http_receiver.port}"]
    theirs = channel_create(team=world.other_team, slug="am", kind=ChannelKind.WEBHOOK, url=url)
    settings.WEBHOOK_ALLOWED_HOSTS = [f"acme=http://localhost:{http_receiver.port}"]

    delivered = WebhookTransport().notify(
        channel=ours, notification=notification_for(ours), timestamp=1700000000
    )
    with pytest.raises(TransportError) as failed:
        WebhookTransport().notify(
            channel=theirs, notification=notification_for(theirs), timestamp=1700000000
        )
    with pytest.raises(RequestRefused):
        _post(url)  # no team at all: only entries for every team apply

    assert delivered.http_status == 200
    assert failed.value.permanent
    assert "a loopback address" in str(failed.value)
    assert len(http_receiver.requests) == 1


def test_an_allowed_local_use_nat64_address_is_let_through_and_only_it(
    settings: Settings,
) -> None:
    settings.WEBHOOK_CONNECT_TIMEOUT_S = settings.WEBHOOK_TIMEOUT_S = 1.0
    with pytest.raises(RequestRefused, match="is a local-use NAT64 address"):
        _post("http://[64:ff9b:1::808:808]:9/hook")
    settings.WEBHOOK_ALLOWED_HOSTS = ["http://[64:ff9b:1::808:808]:9"]
    # Past the guard: the connection itself fails here, where no translator answers.
    with pytest.raises(RequestFailed):
        _post("http://[64:ff9b:1::808:808]:9/hook")
    with pytest.raises(RequestRefused, match="is a local-use NAT64 address"):
        _post("http://[64:ff9b:1::808:809]:9/hook")


def test_an_allowed_ipv6_literal_matches_in_brackets(
    http_receiver_v6: HttpReceiver, settings: Settings
) -> None:
    settings.WEBHOOK_ALLOWED_HOSTS = [f"http://[::1]:{http_receiver_v6.port}"]
    assert guarded_post(http_receiver_v6.url(), body=b"{}", headers={}).status == 200


@pytest.mark.parametrize(
    "url",
    [
        "ftp://example.com/hook",
        "file:///etc/passwd",
        "gopher://example.com:70/",
        "example.com/hook",
    ],
)
def test_only_http_and_https_are_allowed(url: str) -> None:
    with pytest.raises(RequestRefused, match="only http and https"):
        _post(url)


def test_an_unknown_host_is_a_failure_worth_retrying() -> None:
    with pytest.raises(RequestFailed, match="could not resolve"):
        _post("http://no-such-host.invalid/hook")


def test_the_transport_refuses_permanently(
    world: TeamWorld, http_receiver: HttpReceiver, settings: Settings
) -> None:
    # Saved while the server allowed private addresses; it no longer does.
    settings.WEBHOOK_ALLOW_PRIVATE_IPS = True
    channel = channel_create(
        team=world.team, slug="internal", kind=ChannelKind.WEBHOOK, url=http_receiver.url()
    )
    settings.WEBHOOK_ALLOW_PRIVATE_IPS = False
    with pytest.raises(TransportError) as failed:
        WebhookTransport().notify(
            channel=channel, notification=notification_for(channel), timestamp=1700000000
        )
    assert failed.value.permanent
    assert "127.0.0.1 is a loopback address" in str(failed.value)
    assert http_receiver.connections == 0


def test_the_transport_refuses_another_scheme_permanently(world: TeamWorld) -> None:
    channel = channel_create(
        team=world.team, slug="hook", kind=ChannelKind.WEBHOOK, url="https://hooks.example.com/x"
    )
    # A URL that got past the form some other way (an older row, the database).
    type(channel).objects.filter(pk=channel.pk).update(url="file:///etc/passwd")
    channel.refresh_from_db()
    with pytest.raises(TransportError) as failed:
        WebhookTransport().notify(
            channel=channel, notification=notification_for(channel), timestamp=1700000000
        )
    assert failed.value.permanent


# --- TLS: the hostname is used for SNI and the certificate, the checked address for the socket


def _certificate(directory: Path, name: str) -> tuple[Path, Path]:
    cert, key = directory / f"{name}.pem", directory / f"{name}.key"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            "-keyout", str(key), "-out", str(cert), "-subj", f"/CN={name}",
            "-addext", f"subjectAltName=DNS:{name}",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a test certificate")
    directory = tmp_path_factory.mktemp("tls")
    return {name: _certificate(directory, name) for name in ("localhost", "elsewhere.example")}


def _tls_receiver(cert: Path, key: Path) -> HttpReceiver:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return HttpReceiver(tls=context).start()


@pytest.fixture
def https_receiver(certificates: dict[str, tuple[Path, Path]]) -> Iterator[HttpReceiver]:
    receiver = _tls_receiver(*certificates["localhost"])
    yield receiver
    receiver.stop()


def test_https_uses_the_hostname_for_sni_and_the_certificate(
    https_receiver: HttpReceiver,
    certificates: dict[str, tuple[Path, Path]],
    allow_loopback: None,
) -> None:
    ca = str(certificates["localhost"][0])
    answer = guarded_post(https_receiver.url(host="localhost"), body=b"{}", headers={}, ca_certs=ca)
    assert (answer.status, answer.address) == (200, "127.0.0.1")
    assert https_receiver.server_names == ["localhost"]
    assert https_receiver.requests[0].headers["host"] == f"localhost:{https_receiver.port}"


def test_an_allowed_origin_lets_its_scheme_host_and_port_through_and_nothing_else(
    https_receiver: HttpReceiver,
    certificates: dict[str, tuple[Path, Path]],
    settings: Settings,
) -> None:
    settings.WEBHOOK_ALLOWED_HOSTS = [f"https://localhost:{https_receiver.port}"]
    ca = str(certificates["localhost"][0])
    other_port = HttpReceiver().start()
    try:
        # Any path on the allowed origin.
        for path in ("/hook", "/another/path?x=1"):
            url = https_receiver.url(path, host="localhost")
            assert guarded_post(url, body=b"{}", headers={}, ca_certs=ca).status == 200
        for url in (
            f"http://localhost:{https_receiver.port}/hook",  # same host and port, http
            other_port.url(host="localhost"),  # same host, another port
            https_receiver.url(host="127.0.0.1"),  # same address and port, another host
        ):
            with pytest.raises(RequestRefused, match="a loopback address"):
                _post(url)
        assert other_port.connections == 0
    finally:
        other_port.stop()
    assert https_receiver.connections == 2


def test_https_refuses_a_certificate_for_another_name(
    certificates: dict[str, tuple[Path, Path]], allow_loopback: None
) -> None:
    receiver = _tls_receiver(*certificates["elsewhere.example"])
    try:
        with pytest.raises(RequestFailed, match=r"CERTIFICATE_VERIFY_FAILED|certificate"):
            guarded_post(
                receiver.url(host="localhost"),
                body=b"{}",
                headers={},
                ca_certs=str(certificates["elsewhere.example"][0]),
            )
        assert receiver.requests == []
    finally:
        receiver.stop()


def test_https_without_a_trusted_certificate_fails(
    https_receiver: HttpReceiver, allow_loopback: None
) -> None:
    with pytest.raises(RequestFailed):
        guarded_post(https_receiver.url(host="localhost"), body=b"{}", headers={})
    assert https_receiver.requests == []
