"""Real receivers for delivery tests: an HTTP server and an SMTP server, on loopback.

``HttpReceiver`` records every request (headers, body, when) and answers from a script
of ``Reply`` objects (status, body, delay, redirect, a slow drip or a huge stream); it
also counts connections, so a test can tell that nothing reached it. ``SmtpReceiver``
runs aiosmtpd and records each message, refusing the recipients it is told to.
"""

import contextlib
import email
import socket
import ssl
import threading
import time
from dataclasses import dataclass, field
from email.message import EmailMessage
from email.policy import default as default_policy
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, Envelope, Session

from tests.processes import free_port


@dataclass(frozen=True)
class Reply:
    status: int = 200
    body: bytes = b"ok"
    delay_s: float = 0.0  # before the status line
    location: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    # Instead of ``body``: this many bytes, announced in Content-Length and sent in chunks.
    stream_bytes: int = 0
    # Send ``body`` one byte at a time, this long apart.
    drip_interval_s: float = 0.0


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    headers: dict[str, str]  # names lowercased
    body: bytes
    at: float  # time.monotonic()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    receiver: "HttpReceiver"

    def verify_request(self, request: Any, client_address: Any) -> bool:
        with self.receiver.lock:
            self.receiver.connections += 1
        return True


class _Server6(_Server):
    address_family = socket.AF_INET6


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        receiver = self.server.receiver
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        receiver.record(
            Received(
                method=self.command,
                path=self.path,
                headers={k.lower(): v for k, v in self.headers.items()},
                body=body,
                at=time.monotonic(),
            )
        )
        reply = receiver.next_reply()
        if reply.delay_s and receiver.stopping.wait(reply.delay_s):
            return
        self.close_connection = True
        # The client may hang up first: what the cap and timeout tests expect.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self._answer(reply)

    do_GET = do_POST

    def _answer(self, reply: Reply) -> None:
        receiver = self.server.receiver
        self.send_response(reply.status)
        size = reply.stream_bytes or len(reply.body)
        self.send_header("Content-Length", str(size))
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Connection", "close")
        if reply.location:
            self.send_header("Location", reply.location)
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        if reply.stream_bytes:
            chunk = b"x" * 65536
            left = reply.stream_bytes
            while left > 0 and not receiver.stopping.is_set():
                piece = chunk[: min(left, len(chunk))]
                self.wfile.write(piece)
                left -= len(piece)
                receiver.add_sent(len(piece))
        elif reply.drip_interval_s:
            for byte in reply.body:
                if receiver.stopping.wait(reply.drip_interval_s):
                    return
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                receiver.add_sent(1)
        else:
            self.wfile.write(reply.body)
            receiver.add_sent(len(reply.body))


class HttpReceiver:
    """An HTTP server on ``host`` (127.0.0.1 or ::1) and a free port, in a thread; with
    ``tls``, HTTPS, recording the server names that clients asked for (SNI)."""

    def __init__(self, host: str = "127.0.0.1", *, tls: ssl.SSLContext | None = None) -> None:
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.requests: list[Received] = []
        self.replies: list[Reply] = []
        self.connections = 0
        self.bytes_sent = 0
        self.server_names: list[str | None] = []
        server_class = _Server6 if ":" in host else _Server
        self.server = server_class((host, 0), _Handler)
        self.server.receiver = self
        self.scheme = "http"
        if tls is not None:
            tls.sni_callback = self._sni
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
            self.scheme = "https"
        self.host = host
        self.port: int = self.server.server_address[1]
        self._thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def start(self) -> "HttpReceiver":
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()

    def url(self, path: str = "/hook", *, host: str | None = None) -> str:
        shown = host or (f"[{self.host}]" if ":" in self.host else self.host)
        return f"{self.scheme}://{shown}:{self.port}{path}"

    def _sni(self, sock: Any, server_name: str | None, context: ssl.SSLContext) -> None:
        with self.lock:
            self.server_names.append(server_name)

    def script(self, *replies: Reply) -> None:
        """Answer the next requests with these, in order; then 200 "ok"."""
        with self.lock:
            self.replies.extend(replies)

    def next_reply(self) -> Reply:
        with self.lock:
            return self.replies.pop(0) if self.replies else Reply()

    def record(self, request: Received) -> None:
        with self.lock:
            self.requests.append(request)

    def add_sent(self, size: int) -> None:
        with self.lock:
            self.bytes_sent += size


@dataclass(frozen=True)
class Mail:
    mail_from: str
    rcpt_tos: list[str]
    message: EmailMessage

    @property
    def subject(self) -> str:
        # Django folds a non-ASCII subject onto the next line; the parser keeps the space.
        return str(self.message["Subject"]).strip()

    def part(self, content_type: str) -> str:
        found = self.message.get_body(preferencelist=(content_type.split("/")[1],))
        assert found is not None
        assert found.get_content_type() == content_type
        return str(found.get_content())


class _SmtpHandler:
    def __init__(self, receiver: "SmtpReceiver") -> None:
        self.receiver = receiver

    async def handle_MAIL(
        self, server: SMTP, session: Session, envelope: Envelope, address: str, options: list[str]
    ) -> str:
        if self.receiver.sender_reply:
            return self.receiver.sender_reply
        envelope.mail_from = address
        return "250 OK"

    async def handle_RCPT(
        self, server: SMTP, session: Session, envelope: Envelope, address: str, options: list[str]
    ) -> str:
        reply = self.receiver.refuse.get(address.lower())
        if reply:
            return reply
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        content = envelope.original_content or b""
        message = email.message_from_bytes(content, policy=default_policy)
        assert isinstance(message, EmailMessage)
        self.receiver.messages.append(
            Mail(str(envelope.mail_from), list(envelope.rcpt_tos), message)
        )
        return "250 Message accepted for delivery"


class SmtpReceiver:
    """aiosmtpd on 127.0.0.1; ``refuse`` maps an address to the reply refusing it."""

    def __init__(self) -> None:
        self.messages: list[Mail] = []
        self.refuse: dict[str, str] = {}
        self.sender_reply: str | None = None
        self.host = "127.0.0.1"
        self.port = free_port()
        self.controller = Controller(_SmtpHandler(self), hostname=self.host, port=self.port)

    def start(self) -> "SmtpReceiver":
        self.controller.start()
        return self

    def stop(self) -> None:
        self.controller.stop()
