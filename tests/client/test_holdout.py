"""The holdout (``docs/runtime.md``, "Holdout"): a share of requests run with every lever
off, marked on their span and in baggage; the levers' estimates of time saved and a
hedge's percentile come from the stage's ``uncut`` figures once there are enough of
them, since the levers cut the observed ones."""

import asyncio
import math
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from latency_budgets import Attempt, Budgets, DocumentError
from latency_budgets.figures import figures_from_document
from opentelemetry import baggage

from tests.client.support import SAVED_MS, Spans, expected_rest, runtime_document, stage_doc

HOLDOUT = "latency_budget.holdout"


def uncut(stage: dict[str, Any], count: int, p50: float, p95: float, p99: float) -> dict[str, Any]:
    stage["uncut"] = {"window_s": 3600, "count": count, "p50": p50, "p95": p95, "p99": p99}
    return stage


def document(holdout: float | None, *, uncut_count: int = 400) -> dict[str, Any]:
    """Rerank's levers cut its observed tail at 150 ms; the holdout saw it run to 900."""
    doc = runtime_document(
        "rag-chat",
        deadline_ms=4000,
        stages=[
            uncut(stage_doc("rerank", 0, budget_ms=150, p50=60, p95=140, p99=150),
                  uncut_count, p50=70, p95=400, p99=900),
            stage_doc("llm", 1, budget_ms=2000, p50=3950, p95=3980, p99=3990),
        ],
    )  # fmt: skip
    if holdout is not None:
        doc["holdout_percent"] = holdout
    return doc


@pytest.fixture
def all_held_out(spans: Spans) -> Iterator[Budgets]:
    budgets = Budgets.from_documents([document(100)], tracer_provider=spans.provider)
    yield budgets
    budgets.close()


def test_a_request_of_the_holdout_is_marked_on_its_span_and_in_baggage(
    all_held_out: Budgets, spans: Spans
) -> None:
    with all_held_out.request("rag-chat") as req:
        assert req.holdout
        assert baggage.get_baggage(HOLDOUT) == "1"
    assert spans.named("request rag-chat").attributes[HOLDOUT] is True  # type: ignore[index]


def test_no_request_is_held_out_at_zero_and_the_mark_is_absent(spans: Spans) -> None:
    budgets = Budgets.from_documents([document(0)], tracer_provider=spans.provider)
    for _ in range(200):
        with budgets.request("rag-chat") as req:
            assert not req.holdout
            assert baggage.get_baggage(HOLDOUT) is None
    assert all(HOLDOUT not in (span.attributes or {}) for span in spans.finished())


def test_a_document_without_a_share_holds_none_out(spans: Spans) -> None:
    budgets = Budgets.from_documents([document(None)], tracer_provider=spans.provider)
    for _ in range(200):
        with budgets.request("rag-chat") as req:
            assert not req.holdout


def test_the_share_drawn_is_the_documents(spans: Spans) -> None:
    budgets = Budgets.from_documents([document(25)])
    held = 0
    for _ in range(4000):
        with budgets.request("rag-chat") as req:
            held += req.holdout
    # 1000 expected; the standard deviation is 27.
    assert 1000 - 5 * 27 < held < 1000 + 5 * 27


def test_the_applications_share_overrides_the_documents() -> None:
    budgets = Budgets.from_documents([document(100)], holdout_percent=0)
    with budgets.request("rag-chat") as req:
        assert not req.holdout
    budgets = Budgets.from_documents([document(0)], holdout_percent=100)
    with budgets.request("rag-chat") as req:
        assert req.holdout


@pytest.mark.parametrize("share", [-1, 100.5, math.nan])
def test_a_share_out_of_range_is_refused(share: float) -> None:
    with pytest.raises(ValueError, match="holdout_percent"):
        Budgets.from_documents([], holdout_percent=share)


@pytest.mark.parametrize("share", [-1, 101, "2", True, 1e400])
def test_a_document_with_a_share_out_of_range_is_refused(share: Any) -> None:
    doc = document(None)
    doc["holdout_percent"] = share
    with pytest.raises(DocumentError, match="holdout_percent"):
        figures_from_document(doc)


@pytest.mark.parametrize(
    "value", [[], "fast", {"count": -1}, {"count": 5, "p99": "slow"}, {"count": 5, "p50": -3}]
)
def test_a_malformed_uncut_is_refused(value: Any) -> None:
    doc = document(None)
    doc["stages"][0]["uncut"] = value
    with pytest.raises(DocumentError, match="uncut"):
        figures_from_document(doc)


def test_a_request_that_continues_a_callers_holdout_stays_in_it(spans: Spans) -> None:
    caller = Budgets.from_documents([document(100)])
    callee = Budgets.from_documents([document(0)], tracer_provider=spans.provider)
    with caller.request("rag-chat"), callee.request("rag-chat") as downstream:
        assert downstream.inherited
        assert downstream.holdout
    caller = Budgets.from_documents([document(0)])
    callee = Budgets.from_documents([document(100)])
    with caller.request("rag-chat"), callee.request("rag-chat") as downstream:
        # The caller decided: not in the holdout, whatever the callee's share.
        assert not downstream.holdout


# No lever acts in the holdout ---------------------------------------------------------


def test_no_lever_acts_in_a_request_of_the_holdout(all_held_out: Budgets, spans: Spans) -> None:
    calls: list[str] = []

    def slow_rerank(attempt: Attempt) -> str:
        calls.append(attempt.role)
        time.sleep(0.3)  # past the 150 ms allowance and the p95 a hedge waits for
        return "ranked"

    def late_primary(attempt: Attempt) -> Iterator[str]:
        time.sleep(0.3)
        yield "from the primary"

    def fallback(attempt: Attempt) -> Iterator[str]:
        yield "from the fallback"

    with all_held_out.request("rag-chat") as req:
        # Less remains than llm's p50: outside the holdout rerank would be skipped.
        assert not req.should_skip("rerank")
        assert req.cap("rerank", slow_rerank, "kept order") == "ranked"
        assert req.hedge(slow_rerank, stage="rerank", after=10) == "ranked"
        chunks = list(req.fallback(late_primary, fallback, stage="llm", first_token_ms=50))
    assert chunks == ["from the primary"]
    assert calls == ["capped", "first"]
    assert req.decisions == []
    assert all_held_out.ledger.counts() == {}
    assert spans.decisions() == []


def test_no_asyncio_lever_acts_in_a_request_of_the_holdout(all_held_out: Budgets) -> None:
    async def slow(attempt: Attempt) -> str:
        await asyncio.sleep(0.3)
        return "ranked"

    async def late_primary(attempt: Attempt) -> AsyncIterator[str]:
        await asyncio.sleep(0.3)
        yield "from the primary"

    async def fallback(attempt: Attempt) -> AsyncIterator[str]:
        yield "from the fallback"

    async def run() -> list[Any]:
        async with all_held_out.request("rag-chat") as req:
            capped = await req.acap("rerank", slow, "kept order")
            hedged = await req.ahedge(slow, stage="rerank", after=10)
            chunks = [c async for c in req.afallback(late_primary, fallback, stage="llm",
                                                     first_token_ms=50)]  # fmt: skip
            return [capped, hedged, chunks, req.decisions]

    assert asyncio.run(run()) == ["ranked", "ranked", ["from the primary"], []]


# Estimates from the uncut figures -----------------------------------------------------


def cap_saved(budgets: Budgets, spans: Spans) -> float:
    def slow(attempt: Attempt) -> str:
        time.sleep(0.5)
        return "ranked"

    with budgets.request("rag-chat") as req:
        assert req.cap("rerank", slow, "kept order") == "kept order"
    (decision,) = spans.decisions()
    saved: float = decision.attributes[SAVED_MS]
    return saved


def test_a_cap_estimates_what_it_saved_from_the_uncut_times(spans: Spans) -> None:
    budgets = Budgets.from_documents([document(0)], tracer_provider=spans.provider)
    # The observed tail is the cap itself (p99 150 ms): next to nothing saved. The
    # holdout's (p50 70, p99 900) tell what a call past 150 ms had still to run.
    assert cap_saved(budgets, spans) == pytest.approx(expected_rest(70, 900, 150), rel=1e-3)


def test_too_few_holdout_requests_leave_the_observed_figures(spans: Spans) -> None:
    budgets = Budgets.from_documents([document(0, uncut_count=29)], tracer_provider=spans.provider)
    saved = cap_saved(budgets, spans)
    assert saved == pytest.approx(expected_rest(60, 150, 150), rel=1e-3)
    assert saved < expected_rest(70, 900, 150) / 5


def test_a_skip_estimates_what_it_saved_from_the_uncut_times(spans: Spans) -> None:
    budgets = Budgets.from_documents([document(0)], tracer_provider=spans.provider)
    with budgets.request("rag-chat") as req:
        assert req.should_skip("rerank")
    (decision,) = spans.decisions()
    # The mean of the holdout's times (p50 70, p99 900), not of the cut ones.
    assert decision.attributes[SAVED_MS] == pytest.approx(expected_rest(70, 900, 0), rel=1e-3)


def test_a_hedge_waits_for_the_uncut_percentile(spans: Spans) -> None:
    budgets = Budgets.from_documents([document(0)], tracer_provider=spans.provider)
    started: dict[str, float] = {}
    t0 = time.monotonic()

    def attempt_fn(attempt: Attempt) -> str:
        started[attempt.role] = (time.monotonic() - t0) * 1000
        if attempt.role == "first":
            time.sleep(0.8)
        return attempt.role

    with budgets.request("rag-chat") as req:
        assert req.hedge(attempt_fn, stage="rerank", after="p95") == "second"
    # The uncut p95 (400 ms), not the observed one (140 ms) the hedges themselves cut.
    assert 390 <= started["second"] < 700
    (decision,) = spans.decisions()
    # The first had run about 400 ms when the second won: the rest it was expected to
    # take from there, by the holdout's times.
    low, high = (expected_rest(70, 900, ms) for ms in (started["second"], 700))
    assert low * 0.999 <= decision.attributes[SAVED_MS] <= high * 1.001
