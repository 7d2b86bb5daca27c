"""``cap``/``acap``: a call past the stage's allowance is cancelled (its connection to a
real server closed) and the fallback value returned, a ``cap`` recorded with
``saved_ms`` the rest the call was expected to take past its allowance; a call in time
is left alone."""

import asyncio
import math
import time
from collections.abc import Iterator

import pytest
from latency_budgets import Attempt, Budgets

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


def respond(handler: Handler, exchange: Exchange) -> None:
    """``/slow``: an answer after ``SOON_S`` (a blank chunk every 20 ms meanwhile);
    ``/fast``: at once."""
    handler.start_chunked("text/plain")
    if handler.path == "/slow":
        handler.trickle(b" ", seconds=SOON_S)
    handler.chunk(b"ranked")
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
                stages=[
                    stage_doc("rerank", 0, budget_ms=150, p50=60, p95=120, p99=400),
                    stage_doc("short-tail", 1, budget_ms=150, p50=60, p95=90, p99=100),
                    stage_doc("unobserved", 2, budget_ms=150),
                ],
            ),
            runtime_document(
                "no-deadline", deadline_ms=None, stages=[stage_doc("rerank", 0, budget_ms=150)]
            ),
        ],
        tracer_provider=spans.provider,
    )


def capped(
    mode: str, budgets: Budgets, server: Server, path: str, *, stage: str = "rerank",
    pipeline: str = "rag-chat", in_block: bool = False,
) -> tuple[str, float]:  # fmt: skip
    """The lever's answer for ``GET path`` (``"kept order"`` when capped), and the time."""

    def call(attempt: Attempt) -> str:
        return get_text(server, path, attempt)

    async def acall(attempt: Attempt) -> str:
        return await aget_text(server, path, attempt)

    started = time.monotonic()
    if mode == "threads":
        with budgets.request(pipeline) as req:
            if in_block:
                with req.stage(stage):
                    answer = req.cap(stage, call, "kept order")
            else:
                answer = req.cap(stage, call, "kept order")
    else:

        async def run() -> tuple[str, float]:
            async with budgets.request(pipeline) as req:
                if in_block:
                    async with req.stage(stage):
                        answer = await req.acap(stage, acall, "kept order")
                else:
                    answer = await req.acap(stage, acall, "kept order")
            took_ms = (time.monotonic() - started) * 1000
            await asyncio.to_thread(server.settle)
            return answer, took_ms

        return asyncio.run(run())
    return answer, (time.monotonic() - started) * 1000


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("in_block", [False, True])
def test_past_its_allowance_a_call_is_cancelled_and_the_fallback_value_returned(
    mode: str, in_block: bool, budgets: Budgets, server: Server, spans: Spans
) -> None:
    answer, took_ms = capped(mode, budgets, server, "/slow", in_block=in_block)
    assert answer == "kept order"
    assert 150 <= took_ms < 1000
    assert server.exchange(1).closed.wait(SOON_S), "the capped call's connection stayed open"
    (event,) = spans.decisions()
    assert event.span == "rerank"
    assert set(event.attributes) == DECISION_KEYS
    assert event.attributes[STAGE] == "rerank"
    assert event.attributes[ACTION] == "cap"
    assert WINNER not in event.attributes
    # The rest a call of p50 60 and p99 400 is expected to take once past 150 ms.
    assert event.attributes[SAVED_MS] == pytest.approx(expected_rest(60, 400, 150), rel=1e-3)
    remaining = event.attributes[REMAINING_MS]
    assert isinstance(remaining, float)
    assert 4000 - took_ms <= remaining <= 4000 - 150
    stage_span = spans.named("rerank")
    assert stage_span.attributes is not None
    assert stage_span.attributes["latency_budget.allowance_ms"] == 150.0
    assert budgets.ledger.counts() == {("rag-chat", "rerank", "cap"): 1}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("stage", "saved"), [
    # Cut past its p99 (100 ms): little was left to run.
    ("short-tail", expected_rest(60, 100, 150)),
    # No figures: no estimate.
    ("unobserved", 0.0),
])  # fmt: skip
def test_a_cap_past_the_stages_tail_saves_little_and_without_figures_nothing(
    mode: str, stage: str, saved: float, budgets: Budgets, server: Server, spans: Spans
) -> None:
    answer, _ = capped(mode, budgets, server, "/slow", stage=stage)
    assert answer == "kept order"
    (event,) = spans.decisions()
    assert event.attributes[SAVED_MS] == pytest.approx(saved, rel=1e-3, abs=1e-9)
    assert event.attributes[SAVED_MS] < 20
    assert server.exchange(1).closed.wait(SOON_S)


@pytest.mark.parametrize("mode", MODES)
def test_without_a_deadline_the_stages_budget_still_caps(
    mode: str, budgets: Budgets, server: Server, spans: Spans
) -> None:
    answer, took_ms = capped(mode, budgets, server, "/slow", pipeline="no-deadline")
    assert answer == "kept order"
    assert took_ms < 1000
    (event,) = spans.decisions()
    assert event.attributes[ACTION] == "cap"
    assert isinstance(event.attributes[REMAINING_MS], float)
    assert math.isfinite(event.attributes[REMAINING_MS])
    assert server.exchange(1).closed.wait(SOON_S)


@pytest.mark.parametrize("mode", MODES)
def test_a_call_in_time_is_left_alone(
    mode: str, budgets: Budgets, server: Server, spans: Spans
) -> None:
    answer, _ = capped(mode, budgets, server, "/fast")
    assert answer == "ranked"
    assert spans.decisions() == []
    assert budgets.ledger.counts() == {}
    assert server.exchange(1).done.wait(SOON_S)
    assert not server.exchanges[0].closed.is_set()


@pytest.mark.parametrize("mode", MODES)
def test_a_call_that_fails_in_time_fails_the_stage(
    mode: str, budgets: Budgets, spans: Spans
) -> None:
    def call(attempt: Attempt) -> str:
        raise ConnectionRefusedError("reranker down")

    async def acall(attempt: Attempt) -> str:
        raise ConnectionRefusedError("reranker down")

    async def run() -> str:
        async with budgets.request("rag-chat") as req:
            return await req.acap("rerank", acall, "kept order")

    if mode == "threads":
        with budgets.request("rag-chat") as req, pytest.raises(ConnectionRefusedError):
            req.cap("rerank", call, "kept order")
    else:
        with pytest.raises(ConnectionRefusedError):
            asyncio.run(run())
    assert spans.decisions() == []
    assert spans.named("rerank").status.is_ok is False


def test_an_acap_whose_caller_is_cancelled_cancels_its_call(
    budgets: Budgets, server: Server
) -> None:
    """No attempt outlives the lever: the caller's cancellation reaches the call."""
    seen: list[str] = []

    async def acall(attempt: Attempt) -> str:
        try:
            return await aget_text(server, "/slow", attempt)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    async def run() -> bool:
        async with budgets.request("rag-chat") as req:
            # A stage with a wide allowance: only the caller's cancellation stops the call.
            lever = asyncio.create_task(req.acap("wide", acall, "kept order"))
            await asyncio.to_thread(server.exchange, 1)
            lever.cancel()
            with pytest.raises(asyncio.CancelledError):
                await lever
            closed: bool = await asyncio.to_thread(server.exchange(1).closed.wait, SOON_S)
            return closed

    assert asyncio.run(run()), "the call went on after its lever was cancelled"
    assert seen == ["cancelled"]


def test_a_cap_whose_call_ignores_cancellation_still_returns_in_time(
    budgets: Budgets, spans: Spans
) -> None:
    """A thread cannot be stopped: the lever answers at the allowance all the same."""

    def stubborn(attempt: Attempt) -> str:
        time.sleep(0.6)
        return "late"

    with budgets.request("rag-chat") as req:
        started = time.monotonic()
        assert req.cap("rerank", stubborn, "kept order") == "kept order"
        assert time.monotonic() - started < 0.5
    assert [d.action for d in req.decisions] == ["cap"]
