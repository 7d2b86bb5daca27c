"""The degradation ledger: decision events on stored spans become ledger rows at
analysis, replaced when a trace is analysed again, and add up per stage and window.

Known answers: ten one-second RAG traces under a 2.5 s deadline, with decisions whose
counts, saved time and rescues are written out here.
"""

from datetime import UTC, datetime
from typing import Any

import pytest
from rest_framework.test import APIClient

from apps.analysis.models import Degradation, DegradationAction, DegradationWinner
from apps.rollups.selectors.degradations import (
    degradation_counts,
    pipeline_ledger,
    window_requests,
)
from tests.builders.api import error_of, token_client
from tests.builders.ingested_traces import hex_of, ingest, make_rag_pipeline, now_ns
from tests.builders.recompute_traces import rollups_settle
from tests.builders.spans import LLM, ROOT, HandSpan, rag_spans, span
from tests.conftest import TeamWorld, client_for
from tests.timing import MS

pytestmark = pytest.mark.django_db

DECISION = "latency_budget.decision"


def decision(stage: Any, action: Any, saved_ms: Any = 0, winner: Any = None) -> dict[str, Any]:
    attributes = {
        "latency_budget.stage": stage,
        "latency_budget.action": action,
        "latency_budget.reason": "test",
        "latency_budget.remaining_ms": 100.0,
        "latency_budget.saved_ms": saved_ms,
    }
    if winner is not None:
        attributes["latency_budget.winner"] = winner
    return attributes


def with_events(spans: list[HandSpan], span_id: int, *events: tuple[int, dict[str, Any]]) -> None:
    """Add decision events (offset ms from the trace's start, attributes) to one span."""
    for index, hand in enumerate(spans):
        if int(hand.span_id, 16) == span_id:
            t0 = spans[0].start_ns
            spans[index] = span(
                span_id,
                None if hand.parent_id is None else int(hand.parent_id, 16),
                hand.start_ns,
                hand.end_ns,
                name=hand.name,
                kind=hand.kind,
                attributes=dict(hand.attributes),
                events=[
                    *(
                        (name, at, attrs)
                        for (name, at), attrs in zip(
                            hand.events, hand.event_attributes, strict=True
                        )
                    ),
                    *((DECISION, t0 + at * MS, attrs) for at, attrs in events),
                ],
                trace_id=hand.trace_id,
            )


def window(t0: int) -> tuple[int, int]:
    """A minute and a half from 10 s before ``t0``, on the rollups' 10-second grid."""
    start = t0 // 10**9 // 10 * 10 - 10
    return start, start + 90


def traces(t0: int) -> list[list[HandSpan]]:
    built = [rag_spans(trace_id=0x100 + n, t0=t0 + n * 2000 * MS) for n in range(10)]
    # A late first token: the fallback saved 1.6 s, so the second-long request met the
    # 2.5 s deadline because of it.
    with_events(built[0], LLM, (600, decision("ttft", "fallback", 1600, "fallback")))
    # Retrieval skipped, 100 ms saved: met the deadline anyway.
    with_events(built[1], ROOT, (40, decision("retrieval", "skip", 100)))
    # Two decisions on one trace: a hedge the second attempt won, then a cap.
    with_events(
        built[2],
        ROOT,
        (100, decision("retrieval", "hedge", 50, "second")),
        (250, decision("retrieval", "cap", 10.5)),
    )
    # Not the protocol: no stage of the pipeline, an unknown action, a list for an
    # action; a saved time that is no number counts as none.
    with_events(
        built[3],
        ROOT,
        (10, decision("nope", "skip", 5)),
        (20, decision("retrieval", "explode", 5)),
        (30, decision("retrieval", ["skip"], 5)),
        (40, decision("auth", "timeout", "lots")),
        (50, decision("auth", "timeout", -7)),
    )
    return built


def test_decisions_become_ledger_rows_with_known_totals(world: TeamWorld) -> None:
    pipeline = make_rag_pipeline(world.team)
    stages = {stage.slug: stage for stage in pipeline.stages.all()}
    t0 = now_ns() - 60_000 * MS
    ingest(world.team, *traces(t0))

    rows = list(Degradation.objects.order_by("start_ns", "seq"))
    assert [(r.stage_id, r.action, r.winner, r.saved_ns, r.rescued) for r in rows] == [
        (stages["ttft"].pk, DegradationAction.FALLBACK, DegradationWinner.FALLBACK,
         1600 * MS, True),
        (stages["retrieval"].pk, DegradationAction.SKIP, 0, 100 * MS, False),
        (stages["retrieval"].pk, DegradationAction.HEDGE, DegradationWinner.SECOND,
         50 * MS, False),
        (stages["retrieval"].pk, DegradationAction.CAP, 0, 10_500_000, False),
        (stages["auth"].pk, DegradationAction.TIMEOUT, 0, 0, False),
        (stages["auth"].pk, DegradationAction.TIMEOUT, 0, 0, False),
    ]  # fmt: skip
    assert {r.e2e_ns for r in rows} == {1000 * MS}
    assert [r.seq for r in rows if r.stage_id == stages["retrieval"].pk] == [0, 0, 1]

    rollups_settle()
    start, end = window(t0)
    assert window_requests(pipeline=pipeline, start=start, end=end) == 10
    ledger = pipeline_ledger(pipeline=pipeline, start=start, end=end)
    assert ledger.requests == 10
    assert ledger.total.decisions == 6
    assert ledger.total.traces == 4
    assert ledger.rate == pytest.approx(40.0)
    assert ledger.total.rescued == 1
    assert ledger.rescued_share == pytest.approx(10.0)
    assert ledger.total.saved_ms == pytest.approx(1760.5)
    assert ledger.total.by_action == {"fallback": 1, "skip": 1, "hedge": 1, "cap": 1, "timeout": 2}
    assert ledger.total.winners == {"fallback": 1, "second": 1}
    retrieval = ledger.stage(stages["retrieval"].pk)
    assert retrieval is not None
    assert (retrieval.tally.decisions, retrieval.tally.traces, retrieval.rate) == (3, 2, 20.0)
    assert retrieval.tally.mean_saved_ms == pytest.approx(160.5 / 3)
    generation = ledger.stage(stages["generation"].pk)
    assert generation is not None
    assert generation.tally.decisions == 0
    assert generation.rate == 0.0
    counts = degradation_counts(pipeline=pipeline, start=start, end=end, step=60)
    assert sum(counts.values()) == 6
    # Outside the window: nothing.
    empty = pipeline_ledger(pipeline=pipeline, start=end, end=end + 60)
    assert (empty.total.decisions, empty.rate) == (0, None)


def test_a_trace_analysed_again_replaces_its_ledger_rows(world: TeamWorld) -> None:
    pipeline = make_rag_pipeline(world.team)
    t0 = now_ns() - 60_000 * MS
    first = rag_spans(trace_id=0x900, t0=t0)
    with_events(first, LLM, (600, decision("ttft", "fallback", 100, "fallback")))
    ingest(world.team, first)
    assert Degradation.objects.filter(pipeline_id=pipeline.pk).count() == 1
    # A late span of the same trace with another decision: analysed again, two rows.
    late = span(0x77, ROOT, t0 + 10 * MS, t0 + 20 * MS, name="late", trace_id=0x900,
                events=[(DECISION, t0 + 15 * MS, decision("auth", "skip", 5))])  # fmt: skip
    ingest(world.team, [late])
    rows = Degradation.objects.filter(pipeline_id=pipeline.pk).order_by("seq")
    assert [(r.seq, r.action) for r in rows] == [
        (0, DegradationAction.SKIP),
        (1, DegradationAction.FALLBACK),
    ]


def test_one_teams_decisions_never_count_in_anothers_ledger(world: TeamWorld) -> None:
    mine = make_rag_pipeline(world.team)
    theirs = make_rag_pipeline(world.other_team)
    t0 = now_ns() - 60_000 * MS
    spans = rag_spans(trace_id=0xA00, t0=t0)
    with_events(spans, LLM, (600, decision("ttft", "fallback", 100, "fallback")))
    ingest(world.other_team, spans)
    rollups_settle()
    start, end = window(t0)
    assert pipeline_ledger(pipeline=mine, start=start, end=end).total.decisions == 0
    assert pipeline_ledger(pipeline=theirs, start=start, end=end).total.decisions == 1


def test_the_trace_list_finds_the_degraded_traces(world: TeamWorld) -> None:
    pipeline = make_rag_pipeline(world.team)
    t0 = now_ns() - 60_000 * MS
    ingest(world.team, *traces(t0))
    client = client_for(world.viewer)
    base = f"/teams/{world.team.slug}/traces/?pipeline={pipeline.slug}"
    any_stage = client.get(base + "&degraded=on")
    assert any_stage.status_code == 200
    listed = {hex_of(0x100 + n) for n in range(10) if hex_of(0x100 + n) in any_stage.text}
    assert listed == {hex_of(0x100 + n) for n in range(4)}
    # Retrieval was skipped on trace 1 and never ran there: still listed.
    retrieval = client.get(base + "&stage=retrieval&degraded=on").text
    listed = {hex_of(0x100 + n) for n in range(10) if hex_of(0x100 + n) in retrieval}
    assert listed == {hex_of(0x101), hex_of(0x102)}
    # The page shows a wrong flag beside its field.
    assert "Use true or false." in client.get(base + "&degraded=maybe").text
    # Another team's viewer finds nothing of this team's.
    outsider = client_for(world.outsider).get(f"/teams/{world.team.slug}/traces/?degraded=on")
    assert outsider.status_code == 404


def test_the_api_answers_the_ledger_to_its_team_only(world: TeamWorld) -> None:
    pipeline = make_rag_pipeline(world.team)
    t0 = now_ns() - 60_000 * MS
    ingest(world.team, *traces(t0))
    rollups_settle()
    start, end = window(t0)
    url = f"/api/v1/pipelines/{pipeline.slug}/degradations"
    moments = {
        "from": datetime.fromtimestamp(start, UTC).isoformat(),
        "to": datetime.fromtimestamp(end, UTC).isoformat(),
    }
    for user in (world.owner, world.viewer):
        answer = token_client(user).get(url, moments)
        assert answer.status_code == 200, answer.content
        body = answer.json()
        assert (body["requests"], body["deadline_ms"], body["rescued_percent"]) == (10, 2500, 10.0)
        assert body["total"]["decisions"] == 6
        assert body["total"]["requests_degraded"] == 4
        assert body["total"]["by_action"] == {
            "skip": 1, "fallback": 1, "hedge": 1, "cap": 1, "timeout": 2,
        }  # fmt: skip
        assert body["total"]["winners"] == {"primary": 0, "fallback": 1, "first": 0, "second": 1}
        by_stage = {row["stage"]: row for row in body["stages"]}
        assert list(by_stage) == ["auth", "retrieval", "ttft", "generation"]
        assert by_stage["retrieval"]["rate_percent"] == 20.0
        assert by_stage["retrieval"]["saved_ms"] == 160.5
    # Another team's member, with its own pipeline of that slug: its own empty ledger.
    make_rag_pipeline(world.other_team)
    theirs = token_client(world.outsider).get(url, moments).json()
    assert theirs["total"]["decisions"] == 0
    assert token_client(world.outsider).get(
        f"/api/v1/pipelines/{pipeline.slug}/degradations?team={world.team.slug}"
    ).status_code in (403, 404)
    assert APIClient().get(url).status_code in (401, 403)
    bad = token_client(world.owner).get(url, {"window": "forever"})
    assert bad.status_code == 400
    assert "window" in str(error_of(bad))
