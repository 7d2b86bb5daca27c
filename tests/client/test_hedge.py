"""Hedging against a real HTTP server that answers each request as planned: a slow first
request gets a second after the delay, the first to answer wins, the loser's connection
is closed (the server's writes fail); a prompt first request gets no second. Threads
(``req.hedge``) and asyncio (``req.ahedge``) alike."""

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from latency_budgets import Attempt, Budgets, Request

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
    aget_text,
    expected_rest,
    get_text,
    runtime_document,
    serving,
    stage_doc,
)

MODES = ["threads", "asyncio"]
SEARCH_P99 = 2000.0


@dataclass(frozen=True)
class Plan:
    """How the server answers one request: after ``after_s`` (writing a blank chunk every
    20 ms meanwhile, so that it sees a client that leaves), ``body`` or a 503."""

    after_s: float
    body: bytes = b""
    status: int = 200


def planned(plans: dict[int, Plan]) -> Callable[[Handler, Exchange], None]:
    def respond(handler: Handler, exchange: Exchange) -> None:
        plan = plans[exchange.number]
        if plan.status != 200:
            time.sleep(plan.after_s)
            handler.answer(b"unavailable", status=plan.status)
            return
        handler.start_chunked("text/plain")
        handler.trickle(b" ", seconds=plan.after_s)
        handler.chunk(plan.body)
        handler.end_chunks()

    return respond


@pytest.fixture
def budgets(spans: Spans) -> Budgets:
    return Budgets.from_documents(
        [
            runtime_document(
                "rag-chat",
                deadline_ms=4000,
                stages=[stage_doc("search", 0, budget_ms=1500, p50=60, p95=150, p99=SEARCH_P99)],
            )
        ],
        tracer_provider=spans.provider,
    )


@dataclass
class Outcome:
    answer: str
    request: Request
    took_ms: float


def run_hedge(
    mode: str, budgets: Budgets, server: Server, *, after: str | float, in_block: bool = True,
    budget_ms: float | None = None,
) -> Outcome:  # fmt: skip
    stage = None if in_block else "search"

    def fetch(attempt: Attempt) -> str:
        return get_text(server, "/answer", attempt)

    async def afetch(attempt: Attempt) -> str:
        return await aget_text(server, "/answer", attempt)

    if mode == "threads":
        started = time.monotonic()
        with budgets.request("rag-chat", budget_ms=budget_ms) as req:
            if in_block:
                with req.stage("search"):
                    answer = req.hedge(fetch, after=after)
            else:
                answer = req.hedge(fetch, after=after, stage=stage)
        return Outcome(answer, req, (time.monotonic() - started) * 1000)

    async def run() -> Outcome:
        started = time.monotonic()
        async with budgets.request("rag-chat", budget_ms=budget_ms) as req:
            if in_block:
                async with req.stage("search"):
                    answer = await req.ahedge(afetch, after=after)
            else:
                answer = await req.ahedge(afetch, after=after, stage=stage)
        took_ms = (time.monotonic() - started) * 1000
        await asyncio.to_thread(server.settle)
        return Outcome(answer, req, took_ms)

    return asyncio.run(run())


def assert_hedged(outcome: Outcome, spans: Spans, *, winner: str, delay_ms: float) -> float:
    """The one hedge decision, on the stage's span; its saved_ms."""
    (decision,) = outcome.request.decisions
    assert (decision.stage, decision.action, decision.winner) == ("search", "hedge", winner)
    (event,) = spans.decisions()
    assert event.span == "search"
    assert set(event.attributes) == DECISION_KEYS | {WINNER}
    assert event.attributes[STAGE] == "search"
    assert event.attributes[ACTION] == "hedge"
    assert event.attributes[WINNER] == winner
    remaining = event.attributes[REMAINING_MS]
    assert isinstance(remaining, float)
    # Taken when the second attempt went out, after the delay.
    assert 4000 - outcome.took_ms - 5 <= remaining <= 4000 - delay_ms
    saved = event.attributes[SAVED_MS]
    assert isinstance(saved, float)
    return saved


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("after", [150, "p95"])
def test_a_slow_first_attempt_loses_to_a_second_and_is_closed(
    mode: str, after: str | float, budgets: Budgets, spans: Spans
) -> None:
    plans = {1: Plan(SOON_S, b"first"), 2: Plan(0, b"second")}
    with serving(planned(plans)) as server:
        outcome = run_hedge(mode, budgets, server, after=after, in_block=after == 150)
        assert outcome.answer == "second"
        saved = assert_hedged(outcome, spans, winner="second", delay_ms=150)
        # saved: the rest the first was expected to take, having run past the delay
        # until the second won.
        bounds = [expected_rest(60, SEARCH_P99, ms) for ms in (150, outcome.took_ms)]
        assert min(bounds) * 0.999 <= saved <= max(bounds) * 1.001
        assert outcome.took_ms < 1000
        first = server.exchange(1)
        assert first.closed.wait(SOON_S), "the server never saw the loser's connection close"
        assert server.exchange(2).done.wait(SOON_S)
        assert not server.exchanges[1].closed.is_set()
    assert budgets.ledger.counts() == {("rag-chat", "search", "hedge"): 1}


@pytest.mark.parametrize("mode", MODES)
def test_a_first_attempt_that_wins_after_the_hedge_saves_nothing_and_closes_the_second(
    mode: str, budgets: Budgets, spans: Spans
) -> None:
    plans = {1: Plan(0.4, b"first"), 2: Plan(SOON_S, b"second")}
    with serving(planned(plans)) as server:
        outcome = run_hedge(mode, budgets, server, after=150)
        assert outcome.answer == "first"
        assert assert_hedged(outcome, spans, winner="first", delay_ms=150) == 0.0
        assert server.exchange(2).closed.wait(SOON_S)
        assert not server.exchanges[0].closed.is_set()


@pytest.mark.parametrize("mode", MODES)
def test_a_first_attempt_within_the_delay_gets_no_second(
    mode: str, budgets: Budgets, spans: Spans
) -> None:
    with serving(planned({1: Plan(0, b"first")})) as server:
        outcome = run_hedge(mode, budgets, server, after=400)
        assert outcome.answer == "first"
        assert outcome.took_ms < 400
        time.sleep(0.5)  # past the delay: nothing more went out
        assert len(server.exchanges) == 1
    assert outcome.request.decisions == []
    assert spans.decisions() == []
    assert budgets.ledger.counts() == {}
    assert spans.named("search").attributes == {
        "latency_budget.stage": "search",
        "latency_budget.allowance_ms": 1500.0,
    }


@pytest.mark.parametrize("mode", MODES)
def test_no_second_attempt_when_the_deadline_comes_before_the_delay(
    mode: str, budgets: Budgets, spans: Spans
) -> None:
    with serving(planned({1: Plan(0.5, b"first")})) as server:
        outcome = run_hedge(mode, budgets, server, after=400, budget_ms=300)
        assert outcome.answer == "first"
        assert len(server.exchanges) == 1
    assert outcome.request.decisions == []


@pytest.mark.parametrize("mode", MODES)
def test_when_both_attempts_fail_the_error_goes_on_and_the_hedge_is_recorded(
    mode: str, budgets: Budgets, spans: Spans
) -> None:
    plans = {1: Plan(0.3, status=503), 2: Plan(0, status=503)}
    with serving(planned(plans)) as server, pytest.raises(OSError, match="503"):
        run_hedge(mode, budgets, server, after=100)
    (event,) = spans.decisions()
    assert event.attributes[ACTION] == "hedge"
    assert WINNER not in event.attributes
    assert event.attributes[SAVED_MS] == 0.0
    assert spans.named("search").status.is_ok is False
