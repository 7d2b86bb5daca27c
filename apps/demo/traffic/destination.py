"""Where simulate_traffic sends: the server's HTTP side (the spans over OTLP/HTTP, the
client mode's budgets) and its OTLP/gRPC port, each checked, then waited for."""

import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings
from django.core.management.base import CommandError

from apps.demo.traffic.send import GRPC, HTTP_PROTOBUF, PROTOCOL_NAMES, TRACES_PATH

WAIT_POLL_S = 0.5


@dataclass(frozen=True)
class Destination:
    base_url: str  # the HTTP side, without a trailing slash
    protocol: str
    endpoint: str  # where the spans go: base_url's /v1/traces, or the gRPC host:port

    def __str__(self) -> str:
        return f"{self.endpoint} over {PROTOCOL_NAMES[self.protocol]}"

    def waits(self, *, budgets: bool) -> list[tuple[str, Callable[[], bool]]]:
        """What must answer before the run starts, named: the HTTP side when the spans
        or the ``budgets`` go there, the gRPC port when the spans go there."""
        waits: list[tuple[str, Callable[[], bool]]] = []
        if self.protocol == HTTP_PROTOBUF or budgets:
            waits.append((f"{self.base_url}/healthz", lambda: _healthz_answers(self.base_url)))
        if self.protocol == GRPC:
            waits.append((f"{self.endpoint} (OTLP/gRPC)", lambda: _port_accepts(self.endpoint)))
        return waits


def destination_for_run(*, url: str, protocol: str, grpc_endpoint: str | None) -> Destination:
    """The checked destination: ``url`` is the HTTP side's base URL, ``grpc_endpoint``
    (with ``protocol`` grpc only) defaults to where serve_otlp_grpc listens."""
    base_url = _base_url(url)
    if protocol == GRPC:
        endpoint = _grpc_endpoint(grpc_endpoint or _grpc_default())
    elif grpc_endpoint is not None:
        raise CommandError(f"--grpc-endpoint: only with --protocol {GRPC}.")
    else:
        endpoint = base_url + TRACES_PATH
    return Destination(base_url=base_url, protocol=protocol, endpoint=endpoint)


def wait_until_answers(
    answers: Callable[[], bool], *, what: str, timeout: float, stop: threading.Event
) -> bool:
    """True once ``answers()``; False if asked to stop first; CommandError past ``timeout``."""
    deadline = time.monotonic() + timeout
    while not stop.is_set():
        if answers():
            return True
        if time.monotonic() >= deadline:
            raise CommandError(f"No server answered at {what} within {timeout:g} s.")
        stop.wait(WAIT_POLL_S)
    return False


def _base_url(url: str) -> str:
    url = url.strip().rstrip("/")
    url = url.removesuffix(TRACES_PATH)
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise CommandError(f"--url must be an http:// or https:// URL, not “{url}”.")
    return url


def _grpc_default() -> str:
    """Where serve_otlp_grpc listens by default, as an address to connect to."""
    host = settings.OTLP_GRPC_HOST
    # A server listening on every interface answers on the loopback one.
    host = {"0.0.0.0": "127.0.0.1", "::": "::1", "[::]": "::1"}.get(host, host)  # noqa: S104
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"{host}:{settings.OTLP_GRPC_PORT}"


def _grpc_endpoint(value: str) -> str:
    """``host:port``, ``http://host:port`` (plaintext, as without a scheme) or
    ``https://host:port`` (TLS), as the gRPC exporter takes them."""
    value = value.strip().rstrip("/")
    if _grpc_address(value) is None:
        raise CommandError(
            f"--grpc-endpoint must be host:port (https://host:port for TLS), not “{value}”."
        )
    return value


def _grpc_address(endpoint: str) -> tuple[str, int] | None:
    scheme, _, address = endpoint.rpartition("://")
    try:
        parts = urlsplit(f"//{address}")
        host, port = parts.hostname, parts.port
    except ValueError:  # a port that is no number, or out of range
        return None
    if scheme not in ("", "http", "https") or not host or not port or parts.path:
        return None
    return host, port


def _healthz_answers(base_url: str) -> bool:
    """GET /healthz answers 200 (`make run` starts us alongside the web server)."""
    try:
        # The scheme was checked by _base_url.
        with urllib.request.urlopen(f"{base_url}/healthz", timeout=2) as response:  # noqa: S310
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _port_accepts(endpoint: str) -> bool:
    """The gRPC port takes a connection: the server has bound it, and serves what
    connects once started (`make run` starts us alongside serve_otlp_grpc)."""
    address = _grpc_address(endpoint)
    assert address is not None  # checked by _grpc_endpoint
    try:
        with socket.create_connection(address, timeout=2):
            return True
    except OSError:
        return False
