"""What the client's tests share: runtime documents built per ``docs/runtime.md``, the
real OpenTelemetry SDK recording into memory, and a real threaded HTTP server whose
handlers see when the client goes away (a write fails).

The protocol's names are written out here as the docs spell them, not imported from
the client: a test that used the client's own constants would pass with a typo in both.
"""

import asyncio
import http.client
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from latency_budgets import Attempt
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util.types import Attributes

DECISION_EVENT = "latency_budget.decision"
STAGE = "latency_budget.stage"
ACTION = "latency_budget.action"
REASON = "latency_budget.reason"
REMAINING_MS = "latency_budget.remaining_ms"
SAVED_MS = "latency_budget.saved_ms"
WINNER = "latency_budget.winner"
DECISION_KEYS = {STAGE, ACTION, REASON, REMAINING_MS, SAVED_MS}

# How long a test waits for what must happen soon (a connection seen closed, a thread
# done): far above what it takes, so that a loaded 2-core machine does not fail it.
SOON_S = 5.0


# What a lever saved --------------------------------------------------------------------


def expected_rest(p50: float, p99: float, elapsed_ms: float) -> float:
    """``E[T - elapsed | T > elapsed]`` for ``T`` lognormal through ``p50`` and ``p99``, by
    numerical integration over the density (not the client's closed form); at 0, the
    mean."""
    import numpy as np

    mu, sigma = np.log(p50), (np.log(p99) - np.log(p50)) / 2.3263478740408408
    low = np.log(elapsed_ms) if elapsed_ms > 0 else mu - 14 * sigma
    x = np.linspace(low, max(low, mu) + 14 * sigma, 400_001)
    density = np.exp(-0.5 * ((x - mu) / sigma) ** 2)
    rest = (np.exp(x) - elapsed_ms) * density
    return float(np.trapezoid(rest, x) / np.trapezoid(density, x))


# Runtime documents ---------------------------------------------------------------------


def stage_doc(
    slug: str,
    position: int,
    *,
    budget_ms: float | None = None,
    p50: float | None = None,
    p95: float | None = None,
    p99: float | None = None,
) -> dict[str, Any]:
    observed = p50 is not None or p95 is not None or p99 is not None
    return {
        "stage": slug,
        "position": position,
        "budget": None if budget_ms is None else {"percentile": "p95", "ms": budget_ms},
        "observed": {"count": 500 if observed else 0, "p50": p50, "p95": p95, "p99": p99},
    }


def runtime_document(
    pipeline: str = "rag-chat",
    *,
    deadline_ms: float | None = 4000,
    stages: list[dict[str, Any]] | None = None,
    refresh_s: float = 30,
) -> dict[str, Any]:
    """A version 1 runtime document as ``GET /v1/budgets/{pipeline}`` answers it."""
    return {
        "version": 1,
        "pipeline": pipeline,
        "deadline_ms": deadline_ms,
        "budget": {"p95": 2500},
        "objective": None if deadline_ms is None else {"target": 99.0, "threshold_ms": deadline_ms},
        "observed": {"window_s": 900, "count": 5120, "p50": 1210.4, "p95": 2301.0, "p99": 3320.7},
        "stages": stages if stages is not None else [],
        "refresh_s": refresh_s,
    }


# Spans -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Event:
    span: str
    name: str
    attributes: dict[str, Any]


class Spans:
    """A real SDK tracer provider exporting every ended span into memory."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def finished(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> ReadableSpan:
        matching = [span for span in self.finished() if span.name == name]
        assert len(matching) == 1, [span.name for span in self.finished()]
        return matching[0]

    def events(self, name: str | None = None) -> list[Event]:
        return [
            Event(span.name, event.name, attributes(event.attributes))
            for span in self.finished()
            for event in span.events
            if name is None or event.name == name
        ]

    def decisions(self) -> list[Event]:
        return self.events(DECISION_EVENT)


def attributes(value: Attributes) -> dict[str, Any]:
    return dict(value or {})


def wait_until(condition: Callable[[], bool], timeout: float = SOON_S) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


# A real HTTP server --------------------------------------------------------------------


@dataclass
class Exchange:
    """One request the server took, and what it saw of the client."""

    number: int
    path: str
    headers: Message
    closed: threading.Event = field(default_factory=threading.Event)  # a write failed
    done: threading.Event = field(default_factory=threading.Event)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "Server._Http"

    def do_GET(self) -> None:
        exchange = self.server.owner.took(self.path, self.headers)
        try:
            self.server.owner.respond(self, exchange)
        except (BrokenPipeError, ConnectionResetError):
            exchange.closed.set()
        finally:
            exchange.done.set()

    def log_message(self, format: str, *args: Any) -> None:
        pass

    # Writing, each a chance to see that the client went away.

    def start_chunked(self, content_type: str = "text/event-stream") -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        self.wfile.flush()

    def chunk(self, data: bytes) -> None:
        """One chunk, flushed; BrokenPipeError/ConnectionResetError once the client left."""
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def end_chunks(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
        self.close_connection = True

    def answer(self, body: bytes, status: int = 200, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()
        self.close_connection = True

    def trickle(self, data: bytes, *, seconds: float, every: float = 0.02) -> None:
        """Write ``data`` as a chunk every ``every`` for ``seconds``: the client reading it
        or not, a write fails soon after it left."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.chunk(data)
            time.sleep(every)


class Server:
    """A ThreadingHTTPServer on a free loopback port, each request given to ``respond``
    with its ``Exchange`` (numbered from 1 in arrival order)."""

    class _Http(ThreadingHTTPServer):
        daemon_threads = True
        owner: "Server"

    def __init__(self, respond: Callable[[Handler, Exchange], None]) -> None:
        self.respond = respond
        self.exchanges: list[Exchange] = []
        self._lock = threading.Lock()
        self._http = self._Http(("127.0.0.1", 0), Handler)
        self._http.owner = self
        self.port = int(self._http.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(
            target=self._http.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()
        self._stopped = False

    def took(self, path: str, headers: Message) -> Exchange:
        with self._lock:
            exchange = Exchange(len(self.exchanges) + 1, path, headers)
            self.exchanges.append(exchange)
            return exchange

    def exchange(self, number: int) -> Exchange:
        assert wait_until(lambda: len(self.exchanges) >= number), self.exchanges
        return self.exchanges[number - 1]

    def settle(self, timeout: float = SOON_S) -> bool:
        """Wait until every request taken is answered or seen abandoned. An asyncio test
        waits for this inside its loop: ``asyncio.run`` cancels the tasks left when it
        ends, which would hide an attempt that the lever failed to cancel."""
        deadline = time.monotonic() + timeout
        return all(
            exchange.done.wait(max(deadline - time.monotonic(), 0))
            for exchange in list(self.exchanges)
        )

    def stop(self) -> None:
        if not self._stopped:
            self._stopped = True
            self._http.shutdown()
            self._http.server_close()
            self._thread.join(SOON_S)


@contextmanager
def serving(respond: Callable[[Handler, Exchange], None]) -> Iterator[Server]:
    server = Server(respond)
    try:
        yield server
    finally:
        server.stop()


# Clients of that server, as an application would write them ---------------------------


def open_get(server: Server, path: str, attempt: Attempt) -> http.client.HTTPResponse:
    """``GET path`` whose connection the attempt's cancellation closes: the socket is shut
    down (which wakes a read blocked in another thread), then the response closed."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=SOON_S * 2)
    connection.connect()
    sock = connection.sock
    assert sock is not None

    def close() -> None:
        with suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        connection.close()

    attempt.on_cancel(close)
    connection.request("GET", path)
    response = connection.getresponse()
    attempt.on_cancel(response.close)
    if response.status != 200:
        response.close()
        raise OSError(f"HTTP {response.status}")
    return response


def stream_lines(server: Server, path: str, attempt: Attempt) -> Iterator[bytes]:
    """A streaming call: the response's lines as they come."""
    response = open_get(server, path, attempt)
    try:
        while line := response.readline():
            yield line
    finally:
        response.close()


def get_text(server: Server, path: str, attempt: Attempt) -> str:
    response = open_get(server, path, attempt)
    with response:
        return response.read().decode().strip()


async def aopen(server: Server, path: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A raw HTTP/1.1 ``GET`` over asyncio streams; the status line and headers read."""
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nConnection: close\r\n\r\n"
    writer.write(request.encode())
    await writer.drain()
    status = (await reader.readline()).split()
    if status[1:2] != [b"200"]:
        writer.close()
        raise OSError(f"HTTP {b' '.join(status[1:2]).decode()}")
    while (await reader.readline()).strip():
        pass
    return reader, writer


async def achunks(reader: asyncio.StreamReader) -> AsyncIterator[bytes]:
    """The chunks of a chunked body, one ``bytes`` each, as they come."""
    while True:
        size = int((await reader.readline()).strip(), 16)
        if size == 0:
            return
        data = await reader.readexactly(size + 2)
        yield data[:-2]


async def astream(server: Server, path: str, attempt: Attempt) -> AsyncIterator[bytes]:
    """An async streaming call as asyncio code writes it: nothing registered with the
    attempt, the connection closed when the task reading it is cancelled (or on aclose)."""
    reader, writer = await aopen(server, path)
    try:
        async for chunk in achunks(reader):
            yield chunk
    finally:
        writer.close()


async def aget_text(server: Server, path: str, attempt: Attempt) -> str:
    reader, writer = await aopen(server, path)
    try:
        body = b"".join([chunk async for chunk in achunks(reader)])
        return body.decode().strip()
    finally:
        writer.close()
