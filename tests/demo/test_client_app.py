"""The demo application serving planned requests through the latency-budgets client, with
budgets from a runtime document and its spans in memory: stages, levers, slow phases."""

import random
import threading
import time
from typing import Any

import pytest
from latency_budgets import Attempt, Budgets
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from apps.demo.traffic import Profile, TracePlanner, TraceShape
from apps.demo.traffic.client_app import (
    DemoApplication,
    RequestJob,
    RequestOutcome,
    dependency_call,
)
from apps.demo.traffic.llm_call import PRIMARY_MODEL, PRIMARY_PROVIDER
from apps.demo.traffic.planned_steps import planned_request
from apps.demo.traffic.slow_phases import SlowPhases
from tests.demo.scaled_demo import SPEED, scaled_demo_document, scaled_stage_budgets

QUIET = Profile(error_rate=0, outlier_rate=0, tool_rate=0)
DEMO_STAGES = list(scaled_stage_budgets())
DECISION = "latency_budget.decision"


class Served:
    def __init__(self, outcome: RequestOutcome, budgets: Budgets, spans: list[ReadableSpan]):
        self.outcome = outcome
        self.budgets = budgets
        self.spans = spans

    def named(self, name: str) -> list[ReadableSpan]:
        return [span for span in self.spans if span.name == name]

    def decisions(self) -> list[dict[str, Any]]:
        return [
            dict(event.attributes or {})
            for span in self.spans
            for event in span.events
            if event.name == DECISION
        ]


def serve(
    *,
    levers: bool = True,
    slow_step: str | None = None,
    document: dict[str, Any] | None = None,
    seed: int = 5,
    profile: Profile = QUIET,
) -> Served:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    budgets = Budgets.from_documents([document or scaled_demo_document()], tracer_provider=provider)
    planner = TracePlanner(rng=random.Random(seed), shape=TraceShape(), profile=profile)
    application = DemoApplication(
        budgets=budgets,
        tracer=provider.get_tracer("test"),
        pipeline="rag-chat",
        levers=levers,
        speed=SPEED,
        abort=threading.Event(),
    )
    job = RequestJob(
        planned=planned_request(planner.plan()),
        spare=planned_request(planner.plan()),
        slow_step=slow_step,
        slow_factor=SlowPhases().factor,
    )
    outcome = application.serve(job)
    return Served(outcome, budgets, list(exporter.get_finished_spans()))


def start(span: ReadableSpan) -> int:
    assert span.start_time is not None
    return span.start_time


def test_a_request_is_the_server_span_then_the_clients_request_then_a_span_per_stage() -> None:
    served = serve()
    [root] = served.named("POST /chat")
    assert root.kind == SpanKind.SERVER
    assert root.parent is None
    assert (root.attributes or {})["http.route"] == "/chat"
    [request] = served.named("request rag-chat")
    assert request.parent is not None
    assert request.parent.span_id == root.context.span_id
    stages = sorted(
        (s for s in served.spans if s.parent and s.parent.span_id == request.context.span_id),
        key=start,
    )
    assert [s.name for s in stages] == DEMO_STAGES
    assert [(s.attributes or {})["latency_budget.stage"] for s in stages] == DEMO_STAGES
    assert served.outcome == RequestOutcome(
        had_deadline=True, within_deadline=True, failed=False, cut_short=False
    )
    # Nothing slow, no figures to skip or hedge with: the levers leave it alone.
    assert served.budgets.ledger.counts() == {}


def test_a_late_first_token_falls_back_to_the_faster_model_within_the_deadline() -> None:
    served = serve(slow_step="ttft")
    assert served.budgets.ledger.counts() == {("rag-chat", "ttft", "fallback"): 1}
    [ttft] = served.named("ttft")
    [decision] = [dict(e.attributes or {}) for e in ttft.events if e.name == DECISION]
    assert decision["latency_budget.winner"] == "fallback"
    # The first-token stage ends at the fallback's first token, the generation follows.
    assert ttft.end_time is not None
    assert ttft.end_time - start(ttft) < 2 * scaled_stage_budgets()["ttft"] * 1_000_000
    [generation] = served.named("generation")
    assert start(generation) >= ttft.end_time
    assert served.outcome.within_deadline


def test_without_levers_the_same_late_first_token_is_waited_for() -> None:
    with_levers, without = serve(slow_step="ttft"), serve(slow_step="ttft", levers=False)
    assert without.budgets.ledger.counts() == {}
    assert without.decisions() == []
    assert [s.name for s in without.spans if "latency_budget.stage" in (s.attributes or {})] == [
        s.name for s in with_levers.spans if "latency_budget.stage" in (s.attributes or {})
    ]

    def ttft_ms(served: Served) -> float:
        [ttft] = served.named("ttft")
        assert ttft.end_time is not None
        return (ttft.end_time - start(ttft)) / 1e6

    assert ttft_ms(without) > ttft_ms(with_levers) + 50


def test_a_slow_retrieval_is_hedged_and_the_second_replica_wins() -> None:
    document = scaled_demo_document(observed={"retrieval": {"p50": 12, "p95": 20, "p99": 100}})
    served = serve(slow_step="retrieval", document=document)
    assert served.budgets.ledger.counts() == {("rag-chat", "retrieval", "hedge"): 1}
    [decision] = served.decisions()
    assert decision["latency_budget.winner"] == "second"
    assert decision["latency_budget.saved_ms"] > 0
    [retrieval] = served.named("retrieval")
    assert retrieval.end_time is not None
    # Slowed six times, the first replica would have taken ~90 ms at this speed.
    assert (retrieval.end_time - start(retrieval)) / 1e6 < 60


def test_a_rerank_past_its_allowance_is_capped() -> None:
    document = scaled_demo_document()
    for stage in document["stages"]:
        if stage["stage"] == "rerank":
            stage["budget"]["ms"] = 1
    served = serve(document=document)
    assert served.budgets.ledger.counts() == {("rag-chat", "rerank", "cap"): 1}


def test_rerank_is_skipped_when_what_remains_cannot_cover_it() -> None:
    # The server saw rerank and the answer take longer than the whole deadline.
    deadline = scaled_demo_document()["deadline_ms"]
    document = scaled_demo_document(
        observed={"rerank": {"p50": deadline, "p95": deadline, "p99": deadline}}
    )
    served = serve(document=document)
    assert served.budgets.ledger.counts() == {("rag-chat", "rerank", "skip"): 1}
    assert served.named("rerank") == []
    [request] = served.named("request rag-chat")
    assert [e.name for e in request.events] == [DECISION]


def test_a_planned_failure_fails_its_stage_and_the_request() -> None:
    served = serve(profile=Profile(error_rate=1.0, outlier_rate=0, tool_rate=0))
    assert served.outcome.failed
    [root] = served.named("POST /chat")
    assert not root.status.is_ok
    assert (root.attributes or {})["http.response.status_code"] == 500
    failed = [s for s in served.spans if s is not root and not s.status.is_ok]
    assert any("latency_budget.stage" in (s.attributes or {}) for s in failed)


def test_a_call_stops_as_soon_as_its_attempt_is_cancelled() -> None:
    attempt, abort = Attempt(1, "first"), threading.Event()
    threading.Timer(0.05, attempt.cancel).start()
    began = time.monotonic()
    assert dependency_call(10_000, attempt=attempt, speed=1.0, abort=abort) is False
    assert time.monotonic() - began < 0.5


def test_a_call_stops_when_the_run_stops() -> None:
    attempt, abort = Attempt(1, "first"), threading.Event()
    threading.Timer(0.05, abort.set).start()
    began = time.monotonic()
    assert dependency_call(10_000, attempt=attempt, speed=1.0, abort=abort) is False
    assert time.monotonic() - began < 0.5
    assert dependency_call(1, attempt=Attempt(1, "first"), speed=1.0, abort=threading.Event())


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"length_s": 0}, "lasts"),
        ({"every_s": 60, "length_s": 90}, "lasts"),
        ({"first_s": -1}, "first slow phase"),
        ({"factor": 0.5}, "factor"),
        ({"steps": ("rerank",)}, "retrieval or ttft"),
        ({"steps": ()}, "retrieval or ttft"),
    ],
)
def test_slow_phases_that_cannot_be_are_refused(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SlowPhases(**fields)


def test_slow_phases_take_their_steps_in_turn() -> None:
    phases = SlowPhases(every_s=300, length_s=90, first_s=180)
    assert [phases.step_at(s) for s in (0, 179, 180, 269, 270, 479, 480, 569, 570, 780)] == [
        None, None, "retrieval", "retrieval", None, None, "ttft", "ttft", None, "retrieval",
    ]  # fmt: skip
    only = SlowPhases(every_s=10, length_s=10, first_s=0, steps=("ttft",))
    assert {only.step_at(s) for s in range(0, 100, 7)} == {"ttft"}


def test_a_planned_request_is_its_steps_back_to_back_with_the_planned_gaps() -> None:
    every_step = Profile(error_rate=0, tool_rate=1)
    planner = TracePlanner(rng=random.Random(9), shape=TraceShape(), profile=every_step)
    for _ in range(50):
        plan = planner.plan()
        request = planned_request(plan)
        total = sum(s.gap_before_ms + s.duration_ms for s in request.steps) + request.gap_after_ms
        assert total == pytest.approx(plan.root.end_ms)
        names = [s.step for s in request.steps]
        assert names[:6] == ["auth", "history", "rewrite", "embedding", "retrieval", "rerank"]
        if not plan.error:
            assert names[-1] == "chat"
            assert "tool" in names
            chat = request.step("chat")
            assert chat is not None
            assert chat.first_token_ms is not None
            assert 0 < chat.first_token_ms < chat.duration_ms


def engine_timings(span: ReadableSpan) -> dict[str, float]:
    return {
        key.removeprefix("gen_ai.latency."): float(value)  # type: ignore[arg-type]
        for key, value in (span.attributes or {}).items()
        if key.startswith("gen_ai.latency.")
    }


@pytest.mark.parametrize("seed", range(5, 9))
def test_the_answer_is_a_model_call_under_the_first_token_stage_with_the_engines_span(
    seed: int,
) -> None:
    served = serve(levers=False, seed=seed)
    [ttft] = served.named("ttft")
    [chat] = [span for span in served.spans if span.name.startswith("chat ")]
    assert chat.parent is not None
    assert chat.parent.span_id == ttft.context.span_id
    attributes = chat.attributes or {}
    assert attributes["gen_ai.request.model"] == attributes["gen_ai.response.model"]
    chunks = [
        event.timestamp for event in chat.events if event.name == "llm.content.completion.chunk"
    ]
    [first] = [event.timestamp for event in chat.events if event.name == "first_token"]
    assert chunks[0] == first
    assert len(chunks) >= 2
    # Without levers the team's own engine answers every request, its span under the call.
    assert (attributes["gen_ai.provider.name"], attributes["gen_ai.request.model"]) == (
        PRIMARY_PROVIDER,
        PRIMARY_MODEL,
    )
    [engine] = served.named("llm_request")
    assert engine.parent is not None
    assert engine.parent.span_id == chat.context.span_id
    timings = engine_timings(engine)
    assert (
        timings["time_in_queue"] + timings["time_in_model_prefill"]
        <= timings["time_to_first_token"]
    )
    assert start(engine) + timings["time_to_first_token"] * 1e9 <= first


def test_a_slow_first_token_is_the_engine_queueing() -> None:
    usual = engine_timings(serve(levers=False).named("llm_request")[0])
    slow = engine_timings(serve(levers=False, slow_step="ttft").named("llm_request")[0])
    assert slow["time_in_queue"] - usual["time_in_queue"] > 0.8 * (
        slow["time_to_first_token"] - usual["time_to_first_token"]
    )


def test_a_fallback_is_answered_by_the_hosted_model_without_an_engine_span() -> None:
    served = serve(slow_step="ttft")
    calls = {span.name: span for span in served.spans if span.name.startswith("chat ")}
    assert set(calls) == {f"chat {PRIMARY_MODEL}", "chat gpt-4o-mini"}
    fallback = calls["chat gpt-4o-mini"].attributes or {}
    assert fallback["gen_ai.provider.name"] == "openai"
    assert fallback["gen_ai.response.model"] == "gpt-4o-mini"
    # The primary was cancelled before its first token: no answer, no engine span.
    primary = calls[f"chat {PRIMARY_MODEL}"]
    assert "gen_ai.response.model" not in (primary.attributes or {})
    assert served.named("llm_request") == []
