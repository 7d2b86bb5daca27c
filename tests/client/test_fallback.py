"""Fallback on the first token against a real streaming HTTP server (chunked, one flush
per event): a late primary is cancelled, its connection closed (the server's writes
fail), and the fallback streams; keep-alives do not count as a first token; a prompt
primary streams alone. Threads (``req.fallback``) and asyncio (``req.afallback``) alike."""

import asyncio
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from latency_budgets import Attempt, Budgets, Request, is_content_chunk

from tests.client.support import (
    ACTION,
    DECISION_KEYS,
    REMAINING_MS,
    SAVED_MS,
    SOON_S,
    STAGE,
    WINNER,
    Exchange,
    Handler,
    Server,
    Spans,
    astream,
    expected_rest,
    runtime_document,
    serving,
    stage_doc,
    stream_lines,
)

MODES = ["threads", "asyncio"]
LLM_P99 = 3000.0
KEEP_ALIVE = b": keep-alive\n\n"
LATE_S = 0.6  # when a late primary's first token comes: far past the 200-250 ms allowed


def respond(handler: Handler, exchange: Exchange) -> None:
    """``/small``: two events at once. ``/big?first=S&keepalive=B&ping=1``: the first
    event after S seconds, a keep-alive (or a ``[PING]`` data event) every 50 ms before
    it, then events until the client goes (or ``SOON_S``)."""
    url = urlsplit(handler.path)
    query = {key: values[0] for key, values in parse_qs(url.query).items()}
    handler.start_chunked()
    if url.path == "/small":
        handler.chunk(b"data: small-1\n\n")
        handler.chunk(b"data: small-2\n\n")
        handler.end_chunks()
        return
    first = float(query.get("first", "0"))
    filler = b"data: [PING]\n\n" if "ping" in query else KEEP_ALIVE
    end = time.monotonic() + first
    while time.monotonic() < end:
        if "keepalive" in query or "ping" in query:
            handler.chunk(filler)
        time.sleep(0.05)
    handler.chunk(b"data: big-1\n\n")
    if "endless" in query:
        handler.trickle(b"data: more\n\n", seconds=SOON_S)
    else:
        handler.chunk(b"data: big-2\n\n")
        # A late primary goes on writing: the client that left makes these fail.
        if first:
            handler.trickle(b"data: more\n\n", seconds=SOON_S)
    handler.end_chunks()


@pytest.fixture
def server() -> Iterator[Server]:
    with serving(respond) as server:
        yield server


@pytest.fixture
def budgets(spans: Spans) -> Budgets:
    return Budgets.from_documents(
        [
            runtime_document(
                "rag-chat",
                deadline_ms=4000,
                stages=[stage_doc("llm", 0, budget_ms=2000, p50=700, p95=1500, p99=LLM_P99)],
            ),
            runtime_document(
                "tight",
                deadline_ms=4000,
                stages=[stage_doc("llm", 0, budget_ms=250, p50=100, p95=200, p99=LLM_P99)],
            ),
        ],
        tracer_provider=spans.provider,
    )


@dataclass
class Outcome:
    chunks: list[Any]
    request: Request
    took_ms: float

    @property
    def events(self) -> list[bytes]:
        """The data events received, whatever the chunking of the mode."""
        return [
            line
            for chunk in self.chunks
            for line in bytes(chunk).splitlines()
            if line.startswith(b"data:")
        ]


def run_fallback(
    mode: str,
    budgets: Budgets,
    server: Server,
    primary: str,
    *,
    pipeline: str = "rag-chat",
    in_block: bool = True,
    first_token_ms: float | None = 200,
    is_content: Callable[[Any], bool] | None = None,
) -> Outcome:
    """``primary`` then ``/small`` through the lever, in a ``with req.stage("llm")`` block
    or naming the stage (the lever opens it)."""
    stage = None if in_block else "llm"
    options: dict[str, Any] = {
        "first_token_ms": first_token_ms, "stage": stage, "is_content": is_content,
    }  # fmt: skip
    if mode == "threads":

        def sync_primary(attempt: Attempt) -> Iterator[bytes]:
            return stream_lines(server, primary, attempt)

        def sync_fallback(attempt: Attempt) -> Iterator[bytes]:
            return stream_lines(server, "/small", attempt)

        started = time.monotonic()
        with budgets.request(pipeline) as req:
            if in_block:
                with req.stage("llm"):
                    chunks = list(req.fallback(sync_primary, sync_fallback, **options))
            else:
                chunks = list(req.fallback(sync_primary, sync_fallback, **options))
        return Outcome(chunks, req, (time.monotonic() - started) * 1000)

    def async_primary(attempt: Attempt) -> AsyncIterator[bytes]:
        return astream(server, primary, attempt)

    def async_fallback(attempt: Attempt) -> AsyncIterator[bytes]:
        return astream(server, "/small", attempt)

    async def run() -> Outcome:
        started = time.monotonic()
        async with budgets.request(pipeline) as req:
            if in_block:
                async with req.stage("llm"):
                    chunks = [
                        c async for c in req.afallback(async_primary, async_fallback, **options)
                    ]
            else:
                chunks = [c async for c in req.afallback(async_primary, async_fallback, **options)]
        took_ms = (time.monotonic() - started) * 1000
        await asyncio.to_thread(server.settle)
        return Outcome(chunks, req, took_ms)

    return asyncio.run(run())


def assert_fell_back(
    outcome: Outcome, spans: Spans, *, allowance_ms: float, p50: float = 700
) -> None:
    assert outcome.events == [b"data: small-1", b"data: small-2"]
    (decision,) = outcome.request.decisions
    assert (decision.stage, decision.action, decision.winner) == ("llm", "fallback", "fallback")
    (event,) = spans.decisions()
    assert event.span == "llm"
    assert set(event.attributes) == DECISION_KEYS | {WINNER}
    assert event.attributes[STAGE] == "llm"
    assert event.attributes[ACTION] == "fallback"
    assert event.attributes[WINNER] == "fallback"
    # saved: the rest the primary was expected to take once it had run to the switch
    # (at least the allowance, at most the whole call).
    saved = event.attributes[SAVED_MS]
    assert isinstance(saved, float)
    bounds = [expected_rest(p50, LLM_P99, ms) for ms in (allowance_ms, outcome.took_ms)]
    assert min(bounds) * 0.999 <= saved <= max(bounds) * 1.001
    remaining = event.attributes[REMAINING_MS]
    assert isinstance(remaining, float)
    assert 4000 - outcome.took_ms - 5 <= remaining <= 4000 - allowance_ms
    # The switch came at the allowance, not when the primary's late token came.
    assert outcome.took_ms < LATE_S * 1000 - 50
    # The fallback's first content chunk marks the stage's first token.
    assert [e.span for e in spans.events("first_token")] == ["llm"]


@pytest.mark.parametrize("mode", MODES)
def test_a_late_first_token_falls_back_and_closes_the_primary(
    mode: str, budgets: Budgets, server: Server, spans: Spans
) -> None:
    outcome = run_fallback(mode, budgets, server, f"/big?first={LATE_S}")
    assert_fell_back(outcome, spans, allowance_ms=200)
    primary, fallback = server.exchange(1), server.exchange(2)
    assert primary.path.startswith("/big")
    assert fallback.path == "/small"
    assert primary.closed.wait(SOON_S), "the server never saw the primary's connection close"
    assert fallback.done.wait(SOON_S)
    assert not fallback.closed.is_set()
    assert budgets.ledger.counts() == {("rag-chat", "llm", "fallback"): 1}


@pytest.mark.parametrize("mode", MODES)
def test_keep_alives_are_no_first_token(
    mode: str, budgets: Budgets, server: Server, spans: Spans
) -> None:
    outcome = run_fallback(mode, budgets, server, f"/big?first={LATE_S}&keepalive=1")
    assert_fell_back(outcome, spans, allowance_ms=200)
    # The primary's keep-alives went nowhere.
    assert not any(b"keep-alive" in bytes(chunk) for chunk in outcome.chunks)
    assert server.exchange(1).closed.wait(SOON_S)


@pytest.mark.parametrize("mode", MODES)
def test_is_content_says_what_a_first_token_is(
    mode: str, budgets: Budgets, server: Server, spans: Spans
) -> None:
    def not_a_ping(chunk: Any) -> bool:
        return is_content_chunk(chunk) and b"[PING]" not in bytes(chunk)

    outcome = run_fallback(
        mode, budgets, server, f"/big?first={LATE_S}&ping=1", is_content=not_a_ping
    )
    assert_fell_back(outcome, spans, allowance_ms=200)
    assert server.exchange(1).closed.wait(SOON_S)


@pytest.mark.parametrize("mode", MODES)
def test_the_stages_allowance_is_the_default_first_token_time(
    mode: str, budgets: Budgets, server: Server, spans: Spans
) -> None:
    """No ``first_token_ms``: the stage's allowance (250 ms), the lever opening the stage
    itself when named."""
    outcome = run_fallback(
        mode, budgets, server, f"/big?first={LATE_S}", pipeline="tight", in_block=False,
        first_token_ms=None,
    )  # fmt: skip
    assert_fell_back(outcome, spans, allowance_ms=250, p50=100)
    llm = spans.named("llm")
    assert llm.attributes is not None
    assert llm.attributes["latency_budget.allowance_ms"] == 250.0
    request = spans.named("request tight")
    assert llm.parent is not None
    assert llm.parent.span_id == request.context.span_id
    assert server.exchange(1).closed.wait(SOON_S)


@pytest.mark.parametrize("mode", MODES)
def test_a_prompt_primary_streams_alone(
    mode: str, budgets: Budgets, server: Server, spans: Spans
) -> None:
    outcome = run_fallback(mode, budgets, server, "/big?first=0&keepalive=1")
    assert outcome.events == [b"data: big-1", b"data: big-2"]
    assert outcome.request.decisions == []
    assert spans.decisions() == []
    assert [e.span for e in spans.events("first_token")] == ["llm"]
    primary = server.exchange(1)
    assert primary.done.wait(SOON_S)
    assert not primary.closed.is_set()
    time.sleep(0.3)  # past the first-token time: still no fallback called
    assert len(server.exchanges) == 1
    assert budgets.ledger.counts() == {}


def test_a_reader_that_stops_early_closes_the_primary(budgets: Budgets, server: Server) -> None:
    with budgets.request("rag-chat") as req, req.stage("llm"):
        stream = req.fallback(
            lambda attempt: stream_lines(server, "/big?endless=1", attempt),
            lambda attempt: stream_lines(server, "/small", attempt),
            first_token_ms=1000,
        )
        events = []
        for chunk in stream:
            if chunk.startswith(b"data:"):
                events.append(chunk)
            if len(events) == 3:
                break
        assert isinstance(stream, Generator)
        stream.close()
    assert events == [b"data: big-1\n", b"data: more\n", b"data: more\n"]
    assert server.exchange(1).closed.wait(SOON_S)
    assert req.decisions == []


def test_an_async_reader_that_stops_early_closes_the_primary(
    budgets: Budgets, server: Server
) -> None:
    async def run() -> list[bytes]:
        events: list[bytes] = []
        async with budgets.request("rag-chat") as req, req.stage("llm"):
            stream = req.afallback(
                lambda attempt: astream(server, "/big?endless=1", attempt),
                lambda attempt: astream(server, "/small", attempt),
                first_token_ms=1000,
            )
            async for chunk in stream:
                if chunk.startswith(b"data:"):
                    events.append(chunk)
                if len(events) == 3:
                    break
            assert isinstance(stream, AsyncGenerator)
            await stream.aclose()
            closed = await asyncio.to_thread(server.exchange(1).closed.wait, SOON_S)
            assert closed, "the server never saw the primary's connection close"
        return events

    assert asyncio.run(run()) == [b"data: big-1\n\n", b"data: more\n\n", b"data: more\n\n"]
