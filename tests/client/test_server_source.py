"""``ServerSource`` against a real HTTP server serving runtime documents
(``GET /v1/budgets/{pipeline}``, ``docs/runtime.md``): the ETag and 304, the last
document kept when the server is away or answers anything unusable, the refresher alive
after any answer, and a request that never waits for the server."""

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from latency_budgets import Budgets
from latency_budgets.sources import MAX_DOCUMENT_BYTES, ServerSource

from tests.client.support import (
    SOON_S,
    Exchange,
    Handler,
    Server,
    runtime_document,
    serving,
    stage_doc,
    wait_until,
)

TOKEN = "lbm_0123456789abcdef"


def document_bytes(deadline_ms: float, *, refresh_s: float = 30) -> bytes:
    stages = [stage_doc("retrieval", 0, budget_ms=350, p50=120, p95=290, p99=410)]
    doc = runtime_document("rag-chat", deadline_ms=deadline_ms, stages=stages, refresh_s=refresh_s)
    return json.dumps(doc).encode()


@dataclass
class Documents:
    """What the server answers: the document with its ETag (304 when the client holds
    it), or ``bad``: a status with a body, or raw bytes that are no HTTP at all; or it
    hangs until ``release``."""

    body: bytes = field(default_factory=lambda: document_bytes(3000))
    etag: str = '"v1"'
    bad: tuple[int, bytes, dict[str, str]] | bytes | None = None
    hang: bool = False
    release: threading.Event = field(default_factory=threading.Event)

    def respond(self, handler: Handler, exchange: Exchange) -> None:
        if self.hang:
            self.release.wait(SOON_S * 2)
            handler.answer(b"", status=503)
        elif isinstance(self.bad, bytes):
            handler.wfile.write(self.bad)
            handler.wfile.flush()
            handler.close_connection = True
        elif self.bad is not None:
            status, body, headers = self.bad
            handler.answer(body, status=status, headers=headers)
        elif exchange.headers.get("If-None-Match") == self.etag:
            handler.answer(b"", status=304, headers={"ETag": self.etag})
        else:
            headers = {"ETag": self.etag, "Content-Type": "application/json"}
            headers["Cache-Control"] = "max-age=30"
            handler.answer(self.body, headers=headers)


@pytest.fixture
def documents() -> Iterator[Documents]:
    documents = Documents()
    yield documents
    documents.release.set()


@pytest.fixture
def server(documents: Documents) -> Iterator[Server]:
    with serving(documents.respond) as server:
        yield server


def deadline_of(budgets: Budgets) -> float | None:
    figures = budgets.source.figures("rag-chat")
    return None if figures is None else figures.deadline_ms


def test_a_document_is_fetched_with_the_token_then_kept_by_its_etag(
    documents: Documents, server: Server
) -> None:
    source = ServerSource(server.url + "/", TOKEN, start=False)
    assert source.refresh("rag-chat")
    first = source.figures("rag-chat")
    assert first is not None
    assert first.deadline_ms == 3000.0
    asked = server.exchange(1)
    assert asked.path == "/v1/budgets/rag-chat"
    assert asked.headers["Authorization"] == f"Bearer {TOKEN}"
    assert asked.headers["Accept"] == "application/json"
    assert "If-None-Match" not in asked.headers

    # Unchanged: 304, and the very same figures.
    assert source.refresh("rag-chat")
    assert server.exchange(2).headers["If-None-Match"] == '"v1"'
    assert source.figures("rag-chat") is first

    # Changed: the new document and its ETag.
    documents.body, documents.etag = document_bytes(2000), '"v2"'
    assert source.refresh("rag-chat")
    assert server.exchange(3).headers["If-None-Match"] == '"v1"'
    second = source.figures("rag-chat")
    assert second is not None
    assert second.deadline_ms == 2000.0
    assert source.refresh("rag-chat")
    assert server.exchange(4).headers["If-None-Match"] == '"v2"'
    assert source.figures("rag-chat") is second

    budgets = Budgets(source)
    with budgets.request("rag-chat") as req:
        assert 1950 < req.remaining_ms <= 2000
        assert req.timeout_for("retrieval") == 350.0


def test_the_refresher_fetches_in_the_background_and_requests_use_it_once_here(
    server: Server,
) -> None:
    budgets = Budgets.from_server(server.url, TOKEN, timeout_s=2)
    try:
        # Never asked for before: no deadline yet, and the refresher is woken.
        with budgets.request("rag-chat") as req:
            assert req.deadline_unix_ms is None
        assert budgets.wait_ready(["rag-chat"], timeout_s=SOON_S)
        with budgets.request("rag-chat") as req:
            assert 2950 < req.remaining_ms <= 3000
        assert server.exchange(1).path == "/v1/budgets/rag-chat"
    finally:
        budgets.close()
    # Named up front: fetched without a request asking.
    named = Budgets.from_server(server.url, TOKEN, pipelines=["rag-chat"], timeout_s=2)
    try:
        assert wait_until(lambda: deadline_of(named) == 3000.0)
    finally:
        named.close()


def test_when_the_server_goes_away_the_last_document_stays(server: Server) -> None:
    budgets = Budgets(ServerSource(server.url, TOKEN, start=False, timeout_s=1))
    source = budgets.source
    assert isinstance(source, ServerSource)
    assert source.refresh("rag-chat")
    held = source.figures("rag-chat")
    server.stop()
    assert source.refresh("rag-chat")  # refused connection: still holds one
    assert source.figures("rag-chat") is held
    with budgets.request("rag-chat") as req:
        assert 2950 < req.remaining_ms <= 3000


def timed_requests(budgets: Budgets, count: int = 20) -> tuple[float, list[float | None]]:
    """The longest time one ``budgets.request`` took to open and close, and the
    deadlines the requests had."""
    longest, deadlines = 0.0, []
    for _ in range(count):
        started = time.monotonic()
        with budgets.request("rag-chat") as req:
            deadlines.append(None if req.deadline_unix_ms is None else req.remaining_ms)
        longest = max(longest, time.monotonic() - started)
    return longest, deadlines


def test_a_request_never_waits_for_a_server_that_hangs(
    documents: Documents, server: Server
) -> None:
    documents.hang = True
    budgets = Budgets.from_server(server.url, TOKEN, timeout_s=SOON_S)
    try:
        longest, deadlines = timed_requests(budgets, 1)
        server.exchange(1)  # the refresher is in the server's hands now
        more, more_deadlines = timed_requests(budgets)
        assert max(longest, more) < 0.1
        assert deadlines + more_deadlines == [None] * 21
        assert not budgets.wait_ready(["rag-chat"], timeout_s=0.2)
    finally:
        documents.release.set()
        budgets.close()


def test_a_request_keeps_the_last_document_while_a_refresh_hangs(
    documents: Documents, server: Server
) -> None:
    source = ServerSource(server.url, TOKEN, start=False, timeout_s=SOON_S)
    budgets = Budgets(source)
    assert source.refresh("rag-chat")
    documents.hang = True
    refresh = threading.Thread(target=source.refresh, args=("rag-chat",))
    refresh.start()
    try:
        server.exchange(2)
        longest, deadlines = timed_requests(budgets)
        assert longest < 0.1
        assert all(d is not None and 2900 < d <= 3000 for d in deadlines)
    finally:
        documents.release.set()
        refresh.join(SOON_S * 2)
    assert deadline_of(budgets) == 3000.0


CHUNKED_GARBAGE = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
    b"\r\nzz\r\n{}\r\n0\r\n\r\n"
)
SHORT_BODY = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{}"


def bad(body: Any, status: int = 200, **headers: str) -> tuple[int, bytes, dict[str, str]]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return status, data, headers


BAD_ANSWERS: dict[str, tuple[int, bytes, dict[str, str]] | bytes] = {
    "not JSON": bad(b"<html>maintenance</html>"),
    "not UTF-8": bad(b"\xff\xfe\x00{"),
    "version 2": bad({**runtime_document(), "version": 2}),
    "a list": bad([runtime_document()]),
    "a negative deadline": bad(runtime_document(deadline_ms=-5)),
    "an integer past any float": bad(
        b'{"version": 1, "pipeline": "rag-chat", "deadline_ms": 1' + b"0" * 400 + b"}"
    ),
    "nested past any parser": bad(b"[" * 100_000),
    "larger than a document": bad(b" " * MAX_DOCUMENT_BYTES + document_bytes(1000)),
    "500": bad(b"oops", 500),
    "401": bad(b"", 401, **{"WWW-Authenticate": "Bearer"}),
    "404": bad(b"", 404),
    "429": bad(b"", 429, **{"Retry-After": "1"}),
    "no HTTP at all": b"garbage\r\n\r\n",
    "a broken chunked body": CHUNKED_GARBAGE,
    "a body cut short": SHORT_BODY,
}


@pytest.mark.parametrize("answer", BAD_ANSWERS.values(), ids=BAD_ANSWERS.keys())
def test_an_unusable_answer_keeps_the_last_document(
    answer: tuple[int, bytes, dict[str, str]] | bytes, documents: Documents, server: Server
) -> None:
    source = ServerSource(server.url, TOKEN, start=False, timeout_s=2)
    assert source.refresh("rag-chat")
    held = source.figures("rag-chat")
    documents.bad = answer
    assert source.refresh("rag-chat")
    server.exchange(2)
    assert source.figures("rag-chat") is held


def test_the_refresher_lives_on_after_an_answer_that_is_no_http(
    documents: Documents, server: Server
) -> None:
    """A document asking to be refreshed every second; then garbage; then a new document,
    which the same background refresher picks up."""
    documents.body = document_bytes(3000, refresh_s=1)
    budgets = Budgets.from_server(server.url, TOKEN, pipelines=["rag-chat"], timeout_s=2)
    try:
        assert budgets.wait_ready(["rag-chat"], timeout_s=SOON_S)
        documents.bad = b"garbage\r\n\r\n"
        server.exchange(2)
        documents.bad = None
        documents.body, documents.etag = document_bytes(1500, refresh_s=1), '"v2"'
        assert wait_until(lambda: deadline_of(budgets) == 1500.0), "the refresher stopped"
    finally:
        budgets.close()
