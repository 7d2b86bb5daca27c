"""A request's deadline, its stages and the decisions, against ``docs/runtime.md``: what
remains, the allowance a stage gets, the skip rule, the spans' attributes and the
decision event, with the real OpenTelemetry SDK recording."""

import http.client
import math
import re
import socket
import time
from collections.abc import Iterator

import pytest
from latency_budgets import Attempt, Budgets, deadline_from_baggage, is_content_chunk
from opentelemetry import baggage, context
from opentelemetry.trace import NoOpTracerProvider, StatusCode

from tests.client.support import (
    ACTION,
    DECISION_KEYS,
    REASON,
    REMAINING_MS,
    SAVED_MS,
    STAGE,
    WINNER,
    Spans,
    expected_rest,
    runtime_document,
    stage_doc,
)

RERANK_MEAN = expected_rest(80, 400, 0)
STAGES = [
    stage_doc("retrieval", 0, budget_ms=350, p50=100, p95=290, p99=410),
    stage_doc("rerank", 1, budget_ms=150, p50=80, p95=120, p99=400),
    stage_doc("llm", 2, budget_ms=2000, p50=300, p95=1500, p99=3000),
]


@pytest.fixture
def budgets(spans: Spans) -> Iterator[Budgets]:
    budgets = Budgets.from_documents(
        [runtime_document("rag-chat", deadline_ms=4000, stages=STAGES)],
        tracer_provider=spans.provider,
    )
    yield budgets
    budgets.close()


# What remains ----------------------------------------------------------------------------


def test_remaining_counts_down_from_the_pipelines_deadline(budgets: Budgets) -> None:
    before = time.time() * 1000
    with budgets.request("rag-chat") as req:
        after = time.time() * 1000
        assert req.deadline_unix_ms is not None
        assert before + 4000 <= req.deadline_unix_ms <= after + 4000
        assert 3950 < req.remaining_ms <= 4000
        assert not req.expired
        time.sleep(0.05)
        assert req.remaining_ms <= 3950
        assert not req.expired


def test_past_its_deadline_a_request_is_expired_and_stages_get_nothing(budgets: Budgets) -> None:
    with budgets.request("rag-chat", budget_ms=20) as req:
        time.sleep(0.05)
        assert req.remaining_ms < 0
        assert req.expired
        assert req.timeout_for("retrieval") == 0.0
        assert req.timeout_for("no-such-stage") == 0.0


def test_timeout_for_is_the_stages_budget_clamped_to_what_remains(budgets: Budgets) -> None:
    with budgets.request("rag-chat") as req:
        assert req.timeout_for("retrieval") == 350.0
        assert req.timeout_for("llm") == 2000.0
        # A stage without a budget gets what remains.
        assert 3900 < req.timeout_for("no-such-stage") <= 4000
    with budgets.request("rag-chat", budget_ms=200) as req:
        for stage in ("retrieval", "llm", "no-such-stage"):
            allowance = req.timeout_for(stage)
            assert 100 < allowance <= 200
            assert allowance >= req.remaining_ms


def test_without_a_deadline_what_remains_is_infinite_and_budgets_alone_bound(
    spans: Spans,
) -> None:
    budgets = Budgets.from_documents(
        [runtime_document("open", deadline_ms=None, stages=STAGES)],
        tracer_provider=spans.provider,
    )
    for pipeline in ("open", "never-fetched"):
        with budgets.request(pipeline) as req:
            assert req.deadline_unix_ms is None
            assert req.remaining_ms == math.inf
            assert not req.expired
            assert req.timeout_for("no-such-stage") == math.inf
            assert not req.should_skip("rerank")
    with budgets.request("open") as req:
        assert req.timeout_for("retrieval") == 350.0
    assert spans.named("request never-fetched").attributes == {
        "latency_budget.pipeline": "never-fetched",
        "latency_budget.inherited": False,
    }
    assert spans.decisions() == []


def test_the_earliest_deadline_wins(budgets: Budgets) -> None:
    """README: the pipeline's deadline, ``budget_ms`` and ``deadline_unix_ms`` are all
    candidates, and the earliest is the request's."""
    with budgets.request("rag-chat", budget_ms=300) as req:
        assert 250 < req.remaining_ms <= 300
    with budgets.request("rag-chat", budget_ms=60_000) as req:
        assert 3950 < req.remaining_ms <= 4000
    with budgets.request("rag-chat", deadline_unix_ms=time.time() * 1000 + 200) as req:
        assert 150 < req.remaining_ms <= 200
        assert not req.inherited
    with budgets.request("never-fetched", budget_ms=500) as req:
        assert 450 < req.remaining_ms <= 500


def test_a_request_puts_its_deadline_in_baggage_and_a_nested_one_continues_it(
    budgets: Budgets, spans: Spans
) -> None:
    assert baggage.get_baggage("latency_budget.deadline") is None
    with budgets.request("rag-chat", budget_ms=1000) as outer:
        assert outer.deadline_unix_ms is not None
        assert baggage.get_baggage("latency_budget.deadline") == str(int(outer.deadline_unix_ms))
        time.sleep(0.02)
        with budgets.request("rag-chat") as inner:
            assert inner.inherited
            assert inner.deadline_unix_ms == int(outer.deadline_unix_ms)
            assert abs(inner.remaining_ms - outer.remaining_ms) < 5
    assert baggage.get_baggage("latency_budget.deadline") is None
    outer_span, inner_span = sorted(
        spans.finished(), key=lambda span: span.start_time or 0
    )  # fmt: skip
    assert inner_span.parent is not None
    assert inner_span.parent.span_id == outer_span.context.span_id
    assert inner_span.attributes is not None
    assert inner_span.attributes["latency_budget.inherited"] is True
    assert outer_span.attributes is not None
    assert outer_span.attributes["latency_budget.inherited"] is False


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1796543210123", 1796543210123.0),
        ("0", 0.0),
        ("12.5", None),
        ("-5", None),
        ("+5", None),
        ("1e12", None),
        ("abc", None),
        ("", None),
        ("١٢٣", None),  # digits, but not decimal ASCII ones
        (" 123", None),
        ("9" * 40, None),
    ],
)
def test_deadline_from_baggage_takes_decimal_integers_only(
    value: str, expected: float | None
) -> None:
    ctx = baggage.set_baggage("latency_budget.deadline", value)
    assert deadline_from_baggage(ctx) == expected


def test_a_baggage_value_that_is_not_an_integer_is_ignored(budgets: Budgets) -> None:
    token = context.attach(baggage.set_baggage("latency_budget.deadline", "soon"))
    try:
        with budgets.request("rag-chat") as req:
            assert not req.inherited
            assert 3950 < req.remaining_ms <= 4000
            assert req.deadline_unix_ms is not None
            # Its own deadline replaces the unusable one for what it calls.
            assert baggage.get_baggage("latency_budget.deadline") == str(int(req.deadline_unix_ms))
    finally:
        context.detach(token)


# Spans ---------------------------------------------------------------------------------


def test_the_request_span_carries_pipeline_deadline_and_inherited(
    budgets: Budgets, spans: Spans
) -> None:
    with budgets.request("rag-chat") as req:
        assert req.deadline_unix_ms is not None
        deadline = req.deadline_unix_ms
    span = spans.named("request rag-chat")
    assert span.attributes == {
        "latency_budget.pipeline": "rag-chat",
        "latency_budget.deadline": int(deadline),
        "latency_budget.inherited": False,
    }
    assert type(span.attributes["latency_budget.deadline"]) is int
    assert span.end_time is not None


def test_a_stage_span_carries_its_slug_and_allowance_under_the_request(
    budgets: Budgets, spans: Spans
) -> None:
    with budgets.request("rag-chat") as req, req.stage("retrieval"):
        pass
    with budgets.request("rag-chat", budget_ms=200) as req, req.stage("llm"):
        pass
    request = next(s for s in spans.finished() if s.name == "request rag-chat")
    retrieval = spans.named("retrieval")
    assert retrieval.attributes == {
        "latency_budget.stage": "retrieval",
        "latency_budget.allowance_ms": 350.0,
    }
    assert type(retrieval.attributes["latency_budget.allowance_ms"]) is float
    assert retrieval.parent is not None
    assert retrieval.parent.span_id == request.context.span_id
    llm = spans.named("llm")
    assert llm.attributes is not None
    allowance = llm.attributes["latency_budget.allowance_ms"]
    assert isinstance(allowance, float)
    assert 100 < allowance <= 200
    assert spans.decisions() == []


# The skip rule ---------------------------------------------------------------------------


def test_should_skip_when_what_remains_cannot_cover_the_stage_and_the_later_ones(
    budgets: Budgets, spans: Spans
) -> None:
    # rerank p50 80 + llm p50 300 (not opened) = 380 > 350 remaining.
    with budgets.request("rag-chat", budget_ms=350) as req:
        assert req.should_skip("rerank")
        remaining_after = req.remaining_ms
        assert len(req.decisions) == 1
        decision = req.decisions[0]
        # Asked again, the same answer, recorded once.
        assert req.should_skip("rerank")
        assert len(req.decisions) == 1
    assert decision.action == "skip"
    assert decision.stage == "rerank"
    # A skip saves the stage's whole time: its mean, by the fit through p50 80, p99 400.
    assert decision.saved_ms == pytest.approx(RERANK_MEAN, rel=1e-3)
    assert remaining_after <= decision.remaining_ms <= 350
    (event,) = spans.decisions()
    # No stage is open: the event is on the request's span.
    assert event.span == "request rag-chat"
    assert set(event.attributes) == DECISION_KEYS
    assert event.attributes[STAGE] == "rerank"
    assert event.attributes[ACTION] == "skip"
    assert event.attributes[SAVED_MS] == pytest.approx(RERANK_MEAN, rel=1e-3)
    assert isinstance(event.attributes[REMAINING_MS], float)
    assert event.attributes[REMAINING_MS] == pytest.approx(decision.remaining_ms, abs=0.001)
    assert re.fullmatch(
        r"remaining \d+ ms < rerank p50 80 ms \+ rest p50 300 ms", event.attributes[REASON]
    )
    assert budgets.ledger.counts() == {("rag-chat", "rerank", "skip"): 1}
    assert budgets.ledger.saved_ms() == {
        ("rag-chat", "rerank", "skip"): pytest.approx(RERANK_MEAN, rel=1e-3)
    }


def test_should_skip_counts_only_the_later_stages_not_yet_opened(budgets: Budgets) -> None:
    # An earlier stage opened changes nothing: 80 + 300 > 350 still.
    with budgets.request("rag-chat", budget_ms=350) as req:
        with req.stage("retrieval"):
            pass
        assert req.should_skip("rerank")
    # The later stage opened: rerank alone needs 80.
    with budgets.request("rag-chat", budget_ms=350) as req:
        with req.stage("llm"):
            pass
        assert not req.should_skip("rerank")
        assert req.decisions == []
    # retrieval needs 100 + 80 + 300 = 480 > 450; with rerank opened, 400 < 450.
    with budgets.request("rag-chat", budget_ms=450) as req:
        assert req.should_skip("retrieval")
    with budgets.request("rag-chat", budget_ms=450) as req:
        with req.stage("rerank"):
            pass
        assert not req.should_skip("retrieval")
    # Plenty of time, an unknown stage: no skip.
    with budgets.request("rag-chat", budget_ms=2000) as req:
        assert not req.should_skip("rerank")
        assert not req.should_skip("no-such-stage")
        assert req.decisions == []
    assert budgets.ledger.counts() == {
        ("rag-chat", "rerank", "skip"): 1,
        ("rag-chat", "retrieval", "skip"): 1,
    }


def test_a_skip_asked_inside_the_stages_own_block_goes_on_its_span(
    budgets: Budgets, spans: Spans
) -> None:
    with budgets.request("rag-chat", budget_ms=350) as req:
        with req.stage("rerank"):
            assert req.should_skip("rerank")
        with req.stage("llm"):
            assert not req.should_skip("llm")  # 300 < ~350
    (event,) = spans.decisions()
    assert event.span == "rerank"
    assert event.attributes[STAGE] == "rerank"


# The timeout decision ---------------------------------------------------------------------


def test_a_stage_ending_in_timeout_records_a_timeout_and_the_error_goes_on(
    budgets: Budgets, spans: Spans
) -> None:
    def search(port: int, timeout_ms: float) -> None:
        assert 100 < timeout_ms <= 150
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_ms / 1000)
        try:
            connection.request("GET", "/search")
            connection.getresponse()
        finally:
            connection.close()

    # A server that takes the connection (the kernel does) and never answers.
    with (
        socket.create_server(("127.0.0.1", 0)) as silent,
        budgets.request("rag-chat", budget_ms=150) as req,
        pytest.raises(TimeoutError),
        req.stage("retrieval"),
    ):
        search(silent.getsockname()[1], req.timeout_for("retrieval"))
    (decision,) = req.decisions
    assert decision.action == "timeout"
    assert decision.saved_ms == 0.0
    (event,) = spans.decisions()
    assert event.span == "retrieval"
    assert set(event.attributes) == DECISION_KEYS
    assert event.attributes[ACTION] == "timeout"
    assert event.attributes[STAGE] == "retrieval"
    assert event.attributes[SAVED_MS] == 0.0
    assert WINNER not in event.attributes
    stage_span = spans.named("retrieval")
    assert stage_span.status.status_code is StatusCode.ERROR
    assert budgets.ledger.counts() == {("rag-chat", "retrieval", "timeout"): 1}


# Without an SDK ----------------------------------------------------------------------------


def test_with_a_provider_that_records_nothing_the_levers_still_work() -> None:
    def slow(attempt: Attempt) -> str:
        attempt.cancelled.wait(5)
        return "late"

    budgets = Budgets.from_documents(
        [runtime_document("rag-chat", stages=STAGES)], tracer_provider=NoOpTracerProvider()
    )
    assert budgets.tracer() is None
    with budgets.request("rag-chat", budget_ms=350) as req:
        assert req.span is None
        assert 300 < req.remaining_ms <= 350
        assert req.should_skip("rerank")
        with req.stage("retrieval") as stage:
            assert stage.span is None
            assert req.cap("retrieval", slow, "capped") == "capped"
    assert [d.action for d in req.decisions] == ["skip", "cap"]
    assert budgets.ledger.counts() == {
        ("rag-chat", "rerank", "skip"): 1,
        ("rag-chat", "retrieval", "cap"): 1,
    }


# The pieces ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("chunk", "content"),
    [
        (b"data: hello\n\n", True),
        ("token", True),
        (b"", False),
        ("", False),
        (b"   \r\n", False),
        ("\n\n", False),
        (b": keep-alive\n\n", False),
        (": ping\n: ping\n", False),
        (b": comment\ndata: x\n", True),
        (bytearray(b"x"), True),
        (memoryview(b"\n"), False),
        ({"choices": []}, True),
        (None, True),
    ],
)
def test_is_content_chunk(chunk: object, content: bool) -> None:
    assert is_content_chunk(chunk) is content


def test_an_attempt_runs_its_closers_once_and_at_once_when_already_cancelled() -> None:
    attempt = Attempt(1, "first")
    calls: list[str] = []

    def failing() -> None:
        calls.append("failing")
        raise OSError("already closed")

    attempt.on_cancel(failing)
    attempt.on_cancel(lambda: calls.append("second"))
    attempt.cancel()
    attempt.cancel()
    assert calls == ["failing", "second"]
    assert attempt.cancelled.is_set()
    attempt.on_cancel(lambda: calls.append("late"))
    assert calls == ["failing", "second", "late"]


def test_the_ledger_counts_and_sums_by_pipeline_stage_and_action(budgets: Budgets) -> None:
    for budget in (350, 350):
        with budgets.request("rag-chat", budget_ms=budget) as req:
            req.should_skip("rerank")
    with (
        budgets.request("rag-chat", budget_ms=350) as req,
        pytest.raises(TimeoutError),
        req.stage("llm"),
    ):
        raise TimeoutError
    ledger = budgets.ledger
    assert ledger.counts() == {
        ("rag-chat", "rerank", "skip"): 2,
        ("rag-chat", "llm", "timeout"): 1,
    }
    assert ledger.saved_ms()[("rag-chat", "rerank", "skip")] == pytest.approx(
        2 * RERANK_MEAN, rel=1e-3
    )
    assert ledger.total() == 3
    assert ledger.total(action="skip") == 2
    assert ledger.total(pipeline="other") == 0
    ledger.reset()
    assert ledger.counts() == {}
    assert ledger.total() == 0
