"""A real HTTP receiver on loopback, answering from a script, recording every request."""

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Received:
    at: float
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Script:
    """Statuses to answer in turn; the last one repeats."""

    statuses: list[int] = field(default_factory=lambda: [204])
    received: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def next_status(self) -> int:
        with self.lock:
            return self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    script: Script


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        script = self.server.script
        with script.lock:
            script.received.append(
                Received(
                    time.time(), self.path, {k.lower(): v for k, v in self.headers.items()}, body
                )
            )
        status = script.next_status()
        answer = f'{{"status": {status}}}'.encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def scripted_receiver(*statuses: int) -> Iterator[tuple[str, Script]]:
    """``(url, script)`` of a receiver answering ``statuses`` in turn (204 by default)."""
    script = Script(list(statuses) or [204])
    server = _Server(("127.0.0.1", 0), _Handler)
    server.script = script
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hooks/latency", script
    finally:
        server.shutdown()
        server.server_close()
