"""One POST to a team's URL, guarded against server-side request forgery and slow receivers.

The host is resolved when the connection is made, every address is checked, and the
socket connects to an address that was checked: there is no second lookup for DNS to
answer differently (rebinding). The Host header, TLS SNI and certificate verification
still use the hostname. Redirects are never followed, and the whole exchange is bounded
in time (a watchdog shuts the socket down at the deadline, however slowly the receiver
drips) and in size (at most ``WEBHOOK_MAX_RESPONSE_BYTES`` of the answer is read).
"""

import base64
import contextlib
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from http.client import HTTPException
from typing import Any

import urllib3.exceptions
from django.conf import settings
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.response import BaseHTTPResponse
from urllib3.util import parse_url

from apps.alerts.transports.addresses import address_class, parse_ip, with_article
from apps.alerts.webhook_hosts import DEFAULT_PORTS, allow_advice, host_key, hosts_allow

EXCERPT_CHARS = 1000
_READ_CHUNK = 16384

_Address = tuple[socket.AddressFamily, tuple[Any, ...]]


class RequestRefused(Exception):
    """Not sent, and sending again would not help: a refused address, scheme or URL."""


class RequestFailed(Exception):
    """Not answered: DNS, connection, TLS, a broken or timed-out exchange. Worth a retry."""

    def __init__(self, message: str, *, timed_out: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out


@dataclass(frozen=True)
class Answer:
    status: int
    excerpt: str  # the start of the body, decoded leniently
    elapsed_s: float
    bytes_read: int  # of the body, never more than WEBHOOK_MAX_RESPONSE_BYTES
    location: str | None  # of a redirect, which is not followed
    address: str  # the address connected to


@dataclass(frozen=True)
class _Target:
    scheme: str
    host: str  # lowercased, without brackets or a trailing dot
    port: int
    path: str
    authorization: str | None


def _target(url: str) -> _Target:
    try:
        parsed = parse_url(url)
    except urllib3.exceptions.LocationParseError:
        raise RequestRefused(f"refused: “{url}” is not a URL") from None
    scheme = (parsed.scheme or "").lower()
    if scheme not in DEFAULT_PORTS:
        raise RequestRefused(f"refused: only http and https URLs, not “{scheme or url}”")
    host = host_key(parsed.host or "")
    if not host:
        raise RequestRefused(f"refused: “{url}” names no host")
    authorization = None
    if parsed.auth:
        authorization = "Basic " + base64.b64encode(parsed.auth.encode()).decode()
    return _Target(
        scheme=scheme,
        host=host,
        port=parsed.port or DEFAULT_PORTS[scheme],
        path=parsed.request_uri,
        authorization=authorization,
    )


def _unrestricted(target: _Target, team_slug: str | None) -> bool:
    return bool(settings.WEBHOOK_ALLOW_PRIVATE_IPS) or hosts_allow(
        settings.WEBHOOK_ALLOWED_HOSTS,
        team_slug=team_slug,
        scheme=target.scheme,
        host=target.host,
        port=target.port,
    )


def _resolve(host: str, port: int, timeout: float) -> list[_Address]:
    """Every address ``host`` resolves to, or RequestFailed within ``timeout`` seconds."""
    literal = parse_ip(host)
    if literal is not None:
        family = socket.AF_INET6 if literal.version == 6 else socket.AF_INET
        return [(family, (host, port))]
    found: list[_Address] = []
    failure: list[OSError] = []

    def lookup() -> None:
        try:
            for family, _, _, _, sockaddr in socket.getaddrinfo(
                host, port, type=socket.SOCK_STREAM
            ):
                found.append((family, sockaddr))
        except OSError as exc:
            failure.append(exc)

    # getaddrinfo takes no timeout; a lookup left running ends on its own.
    thread = threading.Thread(target=lookup, name="webhook-dns", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise RequestFailed(f"resolving {host} timed out", timed_out=True)
    if failure:
        raise RequestFailed(f"could not resolve {host}: {failure[0]}")
    if not found:
        raise RequestFailed(f"{host} resolves to no address")
    return list(dict.fromkeys(found))


def _refusal(target: _Target, addresses: list[_Address], team_slug: str | None) -> str:
    """Why a webhook may not connect to these addresses, and how to allow it; "" if it may."""
    host = target.host
    for _, sockaddr in addresses:
        address = str(sockaddr[0])
        ip = parse_ip(address)
        if ip is None:
            return f"{host} resolves to “{address}”, not an IP address"
        kind = address_class(ip)
        if kind is None:
            continue
        advice = allow_advice(
            scheme=target.scheme, host=host, port=target.port, team_slug=team_slug
        )
        what = with_article(kind)
        if parse_ip(host) is not None:
            return f"{address} is {what} address, which webhooks may not reach. {advice}"
        return (
            f"{host} resolves to {address}, {what} address, which webhooks may not reach. {advice}"
        )
    return ""


@dataclass(frozen=True)
class TargetCheck:
    """A URL judged by the send path's rule before anything is sent to it."""

    refusal: str  # why a send would be refused, with how to allow it; "" when it would not
    unresolved: str  # why its host does not resolve now; "" when it does


def target_check(url: str, *, team_slug: str | None, timeout: float) -> TargetCheck:
    """Resolve ``url``'s host as a send does and judge every address the same way.

    A host that does not resolve (within ``timeout``) is no refusal: DNS may answer
    later, and each send resolves again. RequestRefused for a URL no send would try.
    """
    target = _target(url)
    try:
        addresses = _resolve(target.host, target.port, timeout)
    except RequestFailed as exc:
        return TargetCheck(refusal="", unresolved=str(exc))
    if _unrestricted(target, team_slug):
        return TargetCheck(refusal="", unresolved="")
    return TargetCheck(refusal=_refusal(target, addresses, team_slug), unresolved="")


class _Guard:
    """Resolves, checks and connects for one request, and enforces its deadline."""

    def __init__(self, target: _Target, *, deadline: float, team_slug: str | None) -> None:
        self.target = target
        self.deadline = deadline
        self.team_slug = team_slug
        self.connect_timeout = float(settings.WEBHOOK_CONNECT_TIMEOUT_S)
        self.unrestricted = _unrestricted(target, team_slug)
        self.address = ""
        self.expired = False
        self._lock = threading.Lock()
        self._handle: socket.socket | None = None

    def remaining(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0 or self.expired:
            raise RequestFailed("timed out before connecting", timed_out=True)
        return left

    def connect(self) -> socket.socket:
        addresses = _resolve(
            self.target.host, self.target.port, min(self.connect_timeout, self.remaining())
        )
        if not self.unrestricted:
            refusal = _refusal(self.target, addresses, self.team_slug)
            if refusal:
                raise RequestRefused(f"refused: {refusal}")
        errors: list[str] = []
        for family, sockaddr in addresses:
            sock = socket.socket(family, socket.SOCK_STREAM)
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.settimeout(min(self.connect_timeout, self.remaining()))
                sock.connect(sockaddr)
                sock.settimeout(self.remaining())
            except TimeoutError:
                sock.close()
                errors.append(f"{sockaddr[0]}: timed out")
                continue
            except OSError as exc:
                sock.close()
                errors.append(f"{sockaddr[0]}: {exc.strerror or exc}")
                continue
            except RequestFailed:
                sock.close()
                raise
            with self._lock:
                # A duplicate of the socket: shutting it down ends any read on the
                # original, even once TLS has wrapped it.
                self._handle = sock.dup()
                self.address = str(sockaddr[0])
                if self.expired:
                    with contextlib.suppress(OSError):
                        self._handle.shutdown(socket.SHUT_RDWR)
            return sock
        raise RequestFailed(
            f"could not connect to {self.target.host}: {'; '.join(errors)}",
            timed_out=all(e.endswith("timed out") for e in errors),
        )

    def expire(self) -> None:
        with self._lock:
            self.expired = True
            if self._handle is not None:
                with contextlib.suppress(OSError):  # closed already
                    self._handle.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        with self._lock:
            if self._handle is not None:
                self._handle.close()
                self._handle = None


class _GuardedHTTPConnection(HTTPConnection):
    guard: _Guard

    def _new_conn(self) -> socket.socket:
        return self.guard.connect()


class _GuardedHTTPSConnection(HTTPSConnection):
    guard: _Guard

    def _new_conn(self) -> socket.socket:
        return self.guard.connect()


def _read_capped(response: BaseHTTPResponse, limit: int) -> bytes:
    """At most ``limit`` bytes of the body, as sent (never decompressed)."""
    chunks: list[bytes] = []
    size = 0
    while size < limit:
        chunk = response.read(min(_READ_CHUNK, limit - size), decode_content=False)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def guarded_post(
    url: str,
    *,
    body: bytes,
    headers: Mapping[str, str],
    team_slug: str | None = None,
    ca_certs: str | None = None,
) -> Answer:
    """POST ``body`` to ``url`` once; raise RequestRefused or RequestFailed if no answer.

    Any HTTP status is an answer, redirects included (``location`` says where to). The
    certificate of an https URL is checked against the system's trust store, or the CA
    bundle at ``ca_certs``. ``team_slug`` is the sending team: entries of
    ``WEBHOOK_ALLOWED_HOSTS`` for another team never let it through.
    """
    target = _target(url)
    total = float(settings.WEBHOOK_TIMEOUT_S)
    started = time.monotonic()
    guard = _Guard(target, deadline=started + total, team_slug=team_slug)
    connection: _GuardedHTTPConnection | _GuardedHTTPSConnection
    if target.scheme == "https":
        connection = _GuardedHTTPSConnection(
            target.host, target.port, timeout=total, ca_certs=ca_certs
        )
    else:
        connection = _GuardedHTTPConnection(target.host, target.port, timeout=total)
    connection.guard = guard
    request_headers = dict(headers)
    if target.authorization and "authorization" not in {k.lower() for k in headers}:
        request_headers["Authorization"] = target.authorization
    watchdog = threading.Timer(total, guard.expire)
    watchdog.daemon = True
    watchdog.start()
    try:
        connection.request(
            "POST",
            target.path,
            body=body,
            headers=request_headers,
            preload_content=False,
            decode_content=False,
        )
        response = connection.getresponse()
        data = _read_capped(response, int(settings.WEBHOOK_MAX_RESPONSE_BYTES))
    except (RequestRefused, RequestFailed):
        raise
    except (OSError, HTTPException, urllib3.exceptions.HTTPError) as exc:
        if guard.expired or isinstance(exc, TimeoutError | urllib3.exceptions.TimeoutError):
            raise RequestFailed(
                f"no complete answer from {target.host} within {total:g} s", timed_out=True
            ) from exc
        raise RequestFailed(f"{target.host}: {type(exc).__name__}: {exc}") from exc
    finally:
        watchdog.cancel()
        connection.close()
        guard.close()
    return Answer(
        status=response.status,
        excerpt=data.decode("utf-8", errors="replace")[:EXCERPT_CHARS],
        elapsed_s=time.monotonic() - started,
        bytes_read=len(data),
        location=response.headers.get("location"),
        address=guard.address,
    )
