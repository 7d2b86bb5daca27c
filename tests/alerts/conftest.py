"""Fixtures for delivery tests: real receivers on loopback, and mail sent to one."""

import socket
from collections.abc import Iterator

import pytest
from pytest_django import Settings

from tests.alerts.receivers import HttpReceiver, SmtpReceiver
from tests.rollups.conftest import eager  # noqa: F401 - tasks run in this process


@pytest.fixture
def http_receiver() -> Iterator[HttpReceiver]:
    """An HTTP receiver on 127.0.0.1; loopback is refused unless a test allows it."""
    receiver = HttpReceiver().start()
    yield receiver
    receiver.stop()


@pytest.fixture
def http_receiver_v6() -> Iterator[HttpReceiver]:
    try:
        receiver = HttpReceiver("::1")
    except OSError:
        pytest.skip("no IPv6 loopback here")
    receiver.start()
    yield receiver
    receiver.stop()


@pytest.fixture
def allow_loopback(settings: Settings) -> None:
    """Let webhooks reach the loopback receivers, whatever their ports."""
    settings.WEBHOOK_ALLOW_PRIVATE_IPS = True


@pytest.fixture
def smtp_server(settings: Settings) -> Iterator[SmtpReceiver]:
    """An SMTP server, with Django's SMTP backend pointed at it."""
    receiver = SmtpReceiver().start()
    smtp_settings(settings, receiver.port)
    yield receiver
    receiver.stop()


@pytest.fixture
def smtp_down(settings: Settings) -> int:
    """Django's SMTP backend pointed at a port nobody listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    smtp_settings(settings, port)
    return port


def smtp_settings(settings: Settings, port: int) -> None:
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST = "127.0.0.1"
    settings.EMAIL_PORT = port
    settings.EMAIL_HOST_USER = ""
    settings.EMAIL_HOST_PASSWORD = ""
    settings.EMAIL_USE_TLS = False
    settings.EMAIL_USE_SSL = False
    settings.EMAIL_TIMEOUT = 5
