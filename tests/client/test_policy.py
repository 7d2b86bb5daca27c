"""The stage's degrade policy and the server's advice, from the runtime document: a lever
left out does not act, and a setting comes from the call, else the policy, else the
advice, else the stage's figures."""

import time
from typing import Any

import pytest
from latency_budgets import Attempt, Budgets, DocumentError

from tests.client.support import runtime_document, stage_doc


def budgets(degrade: dict[str, Any] | None = None, advice: dict[str, Any] | None = None) -> Budgets:
    stage = stage_doc("rerank", 0, budget_ms=100, p50=500, p95=50, p99=400)
    stage["degrade"] = degrade or {}
    stage["advice"] = advice or {}
    return Budgets.from_documents([runtime_document("rag-chat", deadline_ms=300, stages=[stage])])


def slow(attempt: Attempt) -> str:
    attempt.cancelled.wait(0.4)
    return "late" if not attempt.cancelled.is_set() else "cancelled"


def test_a_lever_the_policy_leaves_out_does_not_act() -> None:
    off = budgets({"levers": []})
    with off.request("rag-chat") as req:
        # Without the policy the 500 ms p50 could not fit in 300 ms: skipped.
        assert not req.should_skip("rerank")
        assert req.cap("rerank", slow, "fallback") == "late"
        assert req.hedge(lambda attempt: attempt.role, stage="rerank") == "first"
        stream = req.fallback(
            lambda attempt: iter(["slow answer"]), lambda attempt: iter(["fallback"]),
            stage="rerank", first_token_ms=1,
        )  # fmt: skip
        # The call's own first_token_ms still leaves the fallback out.
        assert list(stream) == ["slow answer"]
    assert req.decisions == []
    on = budgets({"levers": ["skip", "cap"]})
    with on.request("rag-chat") as req:
        assert req.should_skip("rerank")
        assert req.cap("rerank", slow, "fallback") == "fallback"
    assert [d.action for d in req.decisions] == ["skip", "cap"]


def test_the_cap_comes_from_the_policy_before_the_advice_before_the_budget() -> None:
    for document, wanted in (
        (budgets({"cap_ms": 30}, {"cap_ms": 60}), 30),
        (budgets(None, {"cap_ms": 60}), 60),
        (budgets(), 100),
    ):
        with document.request("rag-chat") as req:
            started = time.monotonic()
            assert req.cap("rerank", slow, "fallback") == "fallback"
            took = (time.monotonic() - started) * 1000
        assert wanted - 5 <= took < wanted + 150, (wanted, took)


def test_the_hedge_waits_for_the_policy_or_the_advice() -> None:
    for document, wanted in (
        (budgets({"hedge_after": 20}, {"hedge_after_ms": 80}), 20.0),
        (budgets(None, {"hedge_after_ms": 80}), 80.0),
        (budgets(), 50.0),  # the stage's p95
    ):
        sent: list[float] = []
        clock = [time.monotonic()]

        def call(attempt: Attempt, sent: list[float] = sent, clock: list[float] = clock) -> str:
            sent.append((time.monotonic() - clock[0]) * 1000)
            if attempt.role == "first":
                attempt.cancelled.wait(1.0)
            return attempt.role

        with document.request("rag-chat", budget_ms=5000) as req:
            clock[0] = time.monotonic()
            assert req.hedge(call, stage="rerank") == "second"
        assert wanted - 5 <= sent[1] < wanted + 150, (wanted, sent)
        # The call's own delay wins over both.
        with document.request("rag-chat", budget_ms=5000) as req:
            assert req.hedge(lambda attempt: attempt.role, after=0, stage="rerank") in (
                "first", "second",
            )  # fmt: skip


def test_the_first_token_timeout_comes_from_the_policy_or_the_advice() -> None:
    for document in (budgets({"first_token_ms": 30}), budgets(None, {"first_token_ms": 30})):

        def primary(attempt: Attempt) -> Any:
            attempt.cancelled.wait(0.5)
            yield "primary"

        with document.request("rag-chat", budget_ms=5000) as req:
            started = time.monotonic()
            stream = req.fallback(primary, lambda attempt: iter(["fallback"]), stage="rerank")
            assert list(stream) == ["fallback"]
            assert (time.monotonic() - started) * 1000 < 300


@pytest.mark.parametrize(
    ("degrade", "advice"),
    [
        ({"levers": "skip"}, None),
        ({"levers": [1]}, None),
        ({"cap_ms": -1}, None),
        ({"hedge_after": "p90"}, None),
        ({"first_token_ms": "soon"}, None),
        ("off", None),
        (None, {"cap_ms": float("inf")}),
        (None, {"hedge_after_ms": True}),
        (None, []),
    ],
)
def test_a_policy_the_client_cannot_read_refuses_the_document(degrade: Any, advice: Any) -> None:
    stage = stage_doc("rerank", 0)
    stage["degrade"], stage["advice"] = degrade, advice
    with pytest.raises(DocumentError):
        Budgets.from_documents([runtime_document(stages=[stage])])
