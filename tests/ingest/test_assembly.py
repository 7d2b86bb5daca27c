"""Stored batches become spans, spans assemble into traces, quiet traces are finalized."""

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from apps.analysis.models import StageSample
from apps.analysis.services.finalize import traces_finalize_due
from apps.ingest.decoding import decode_otlp_protobuf
from apps.ingest.models import Encoding, RawBatch, Trace, TraceState
from apps.ingest.selectors import traces_for_team
from apps.ingest.services.batches import accepted_batch_store, raw_batch_store, raw_batches_drain
from apps.ingest.span_store import span_store
from apps.pipelines.models import Pipeline
from apps.teams.models import Team
from tests.builders.configuration import make_pipeline, make_rule, make_stage
from tests.builders.spans import ROOT, T0, HandSpan, encode, rag_spans, span
from tests.builders.stored_spans import stored_spans
from tests.conftest import TeamWorld
from tests.timing import DAY, MS, S

TRACE = 0xABCDEF0123456789ABCDEF0123456789


@pytest.fixture
def rag_pipeline(world: TeamWorld) -> Pipeline:
    pipeline = make_pipeline(
        world.team, "rag-chat", match_service="chat-api", match_root_span="POST /chat"
    )
    make_rule(make_stage(pipeline, "auth"), span_name="auth*")
    make_rule(make_stage(pipeline, "retrieval"), span_name="vector.search*")
    make_rule(
        make_stage(pipeline, "ttft"),
        attributes={"gen_ai.operation.name": "chat"},
        portion="until_first_token",
    )
    make_rule(
        make_stage(pipeline, "generation"),
        attributes={"gen_ai.operation.name": "chat"},
        portion="after_first_token",
    )
    return pipeline


def store(team: Team, spans: list[HandSpan]) -> RawBatch:
    """As the request path stores an accepted body (span rows on PostgreSQL)."""
    body = encode(spans)
    return accepted_batch_store(team=team, token=None, decoded=decode_otlp_protobuf(body))


def store_raw(team: Team, spans: list[HandSpan]) -> RawBatch:
    """A body kept as sent, decoded by the worker (other databases, older batches)."""
    return raw_batch_store(
        team=team, token=None, encoding=Encoding.OTLP_PROTOBUF, body=encode(spans),
        span_count=len(spans),
    )  # fmt: skip


def finalize_later(seconds: float = 60) -> int:
    return traces_finalize_due(now=timezone.now() + timedelta(seconds=seconds)).traces


def samples_ms(trace: Trace) -> dict[str, tuple[float, float]]:
    assert trace.pipeline is not None
    stages = {s.id: s.slug for s in trace.pipeline.stages.all()}
    return {
        stages[s.stage_id]: (s.wall_ns / MS, s.critical_ns / MS)
        for s in StageSample.objects.filter(trace_pk=trace.pk)
    }


def test_a_trace_split_over_batches_root_last_is_finalized_with_its_stages(
    world: TeamWorld, rag_pipeline
) -> None:
    spans = rag_spans(TRACE)
    store(world.team, spans[1:3])
    store(world.team, spans[3:])
    store(world.team, spans[:1])
    drained = raw_batches_drain()
    assert (drained.batches, drained.spans_new, drained.traces_touched) == (3, 5, 1)
    assert not RawBatch.objects.exists()

    trace = Trace.objects.get()
    assert trace.span_count == 5
    assert trace.root_span_id is not None
    assert traces_finalize_due().traces == 0  # not idle yet
    assert finalize_later() == 1

    trace.refresh_from_db()
    assert trace.state == TraceState.FINALIZED
    assert trace.pipeline == rag_pipeline
    assert not trace.incomplete
    assert trace.duration_ns == 1000 * MS
    assert samples_ms(trace) == {
        "auth": (50, 50),
        "retrieval": (250, 250),  # the slower of the two parallel searches is critical
        "ttft": (200, 200),
        "generation": (450, 450),
    }
    critical = sum(s.critical_ns for s in StageSample.objects.filter(trace_pk=trace.pk))
    assert critical + trace.untracked_critical_ns == trace.duration_ns
    assert trace.untracked_critical_ns == 50 * MS  # 950-1000 belongs to the root only


def test_batches_kept_as_sent_and_span_rows_drain_together(world: TeamWorld, rag_pipeline) -> None:
    spans = rag_spans(TRACE)
    store_raw(world.team, spans[:2])
    store(world.team, spans[1:])
    drained = raw_batches_drain()
    assert (drained.batches, drained.spans_received, drained.spans_new) == (2, 6, 5)
    assert Trace.objects.get().span_count == 5
    assert finalize_later() == 1
    assert set(samples_ms(Trace.objects.get())) == {"auth", "retrieval", "ttft", "generation"}


def test_a_replayed_batch_counts_once(world: TeamWorld, rag_pipeline) -> None:
    spans = rag_spans(TRACE)
    store(world.team, spans)
    store(world.team, spans)
    store(world.team, spans[2:4])
    drained = raw_batches_drain()
    assert drained.spans_received == 12
    assert drained.spans_new == 5
    assert len(stored_spans()) == 5
    assert Trace.objects.get().span_count == 5


def test_trace_rows_count_each_span_once_and_name_the_least_parentless_span_root(
    world: TeamWorld,
) -> None:
    def timed(span_id: int, parent: int | None, start_ms: int, trace: int = TRACE) -> HandSpan:
        return span(span_id, parent, T0 + start_ms * MS, T0 + 900 * MS, name="s", trace_id=trace)

    # Created in this drain: two parentless spans, a child, every span twice.
    batch = [timed(0x60, None, 5), timed(0x15, None, 7), timed(0x20, 0x60, 9)]
    store(world.team, batch)
    store(world.team, batch[::-1])
    # Created without a root, which two later parentless spans bring.
    other = TRACE + 1
    store(world.team, [timed(0x21, 0x70, 3, other)])
    raw_batches_drain()
    store(world.team, [timed(0x70, None, 1, other), timed(0x30, None, 2, other)] * 2)
    store(world.team, [timed(0x05, None, 0)])  # the first trace has its root already
    raw_batches_drain()

    first = Trace.objects.get(trace_id=TRACE.to_bytes(16, "big"))
    second = Trace.objects.get(trace_id=other.to_bytes(16, "big"))
    assert (first.span_count, bytes(first.root_span_id or b"").hex()) == (4, f"{0x15:016x}")
    assert (second.span_count, bytes(second.root_span_id or b"").hex()) == (3, f"{0x30:016x}")
    assert (first.first_span_start_ns, first.last_span_start_ns) == (T0, T0 + 9 * MS)
    assert (second.first_span_start_ns, second.last_span_start_ns) == (T0 + MS, T0 + 3 * MS)


def test_a_late_span_reopens_the_trace_and_replaces_its_samples(
    world: TeamWorld, rag_pipeline
) -> None:
    spans = rag_spans(TRACE)
    store(world.team, spans[:4])
    raw_batches_drain()
    finalize_later()
    trace = Trace.objects.get()
    assert set(samples_ms(trace)) == {"auth", "retrieval"}

    store(world.team, spans[4:])  # the LLM span arrives after finalization
    raw_batches_drain()
    trace.refresh_from_db()
    assert trace.state == TraceState.OPEN

    store(world.team, spans[4:])  # and once more: no effect
    raw_batches_drain()
    finalize_later()
    trace.refresh_from_db()
    assert trace.state == TraceState.FINALIZED
    assert trace.revision == 2
    assert StageSample.objects.filter(trace_pk=trace.pk).count() == 4
    assert samples_ms(trace)["generation"] == (450, 450)


def test_a_quiet_trace_with_its_root_settles_with_its_samples_before_it_is_final(
    world: TeamWorld, rag_pipeline, settings
) -> None:
    store(world.team, rag_spans(TRACE))
    raw_batches_drain()
    settle, idle = settings.TRACE_SETTLE_SECONDS, settings.TRACE_IDLE_SECONDS
    assert settle < idle
    assert finalize_later(settle - 0.5) == 0  # still arriving, perhaps
    assert finalize_later(settle + 0.5) == 1
    trace = Trace.objects.get()
    assert trace.state == TraceState.SETTLED
    assert trace.revision == 1
    assert set(samples_ms(trace)) == {"auth", "retrieval", "ttft", "generation"}
    assert list(traces_for_team(team=world.team)) == [trace]

    soon = trace.last_span_at + timedelta(seconds=idle - 1)
    later = trace.last_span_at + timedelta(seconds=idle)
    assert (trace.state_label(soon), trace.state_label(later)) == ("settled", "finalized")
    # Final without another pass: nothing is due, nothing is computed again.
    assert finalize_later(idle + 1) == 0
    trace.refresh_from_db()
    assert (trace.state, trace.revision) == (TraceState.SETTLED, 1)


def test_a_span_arriving_while_settled_recomputes_the_trace_once(
    world: TeamWorld, rag_pipeline, settings
) -> None:
    spans = rag_spans(TRACE)
    store(world.team, spans[:4])  # the root, auth and retrieval; the LLM span is late
    raw_batches_drain()
    assert finalize_later(settings.TRACE_SETTLE_SECONDS + 0.5) == 1
    trace = Trace.objects.get()
    assert trace.state == TraceState.SETTLED
    assert set(samples_ms(trace)) == {"auth", "retrieval"}
    assert trace.untracked_critical_ns == 700 * MS  # 300-1000 belongs to the root alone

    store(world.team, spans[4:])
    store(world.team, spans[1:2])  # a replay changes nothing
    raw_batches_drain()
    trace.refresh_from_db()
    assert (trace.state, trace.span_count) == (TraceState.OPEN, 5)
    assert finalize_later(settings.TRACE_SETTLE_SECONDS + 0.5) == 1
    trace.refresh_from_db()
    assert (trace.state, trace.revision) == (TraceState.SETTLED, 2)
    assert StageSample.objects.filter(trace_pk=trace.pk).count() == 4
    assert samples_ms(trace)["generation"] == (450, 450)
    critical = sum(s.critical_ns for s in StageSample.objects.filter(trace_pk=trace.pk))
    assert critical + trace.untracked_critical_ns == trace.duration_ns


def test_a_settle_time_as_long_as_the_idle_time_finalizes_in_one_step(
    world: TeamWorld, rag_pipeline, settings
) -> None:
    settings.TRACE_SETTLE_SECONDS = settings.TRACE_IDLE_SECONDS + 30
    store(world.team, rag_spans(TRACE))
    raw_batches_drain()
    assert finalize_later(settings.TRACE_IDLE_SECONDS - 1) == 0
    assert finalize_later(settings.TRACE_IDLE_SECONDS + 1) == 1
    trace = Trace.objects.get()
    assert trace.state == TraceState.FINALIZED
    assert trace.state_label(trace.last_span_at) == "finalized"
    assert len(samples_ms(trace)) == 4


def test_a_trace_without_root_is_finalized_incomplete_after_the_maximum_wait(
    world: TeamWorld, rag_pipeline, settings
) -> None:
    store(world.team, rag_spans(TRACE)[1:])
    raw_batches_drain()
    assert finalize_later(settings.TRACE_IDLE_SECONDS + 1) == 0  # idle, but no root yet
    assert finalize_later(settings.TRACE_MAX_WAIT_SECONDS + 1) == 1
    trace = Trace.objects.get()
    assert trace.incomplete
    assert trace.state == TraceState.FINALIZED
    assert not StageSample.objects.exists()


def test_a_trace_matching_no_pipeline_is_kept_unmatched(world: TeamWorld, rag_pipeline) -> None:
    spans = [span(0x99, name="GET /health", kind="server", trace_id=0x1234)]
    store(world.team, spans)
    raw_batches_drain()
    finalize_later()
    trace = Trace.objects.get()
    assert trace.pipeline is None
    assert trace.root_name == "GET /health"
    assert trace.root_service == "chat-api"


def test_one_teams_spans_never_reach_another_teams_trace(world: TeamWorld, rag_pipeline) -> None:
    store(world.team, rag_spans(TRACE))
    store(world.other_team, rag_spans(TRACE))  # the same trace id, sent by another team
    raw_batches_drain()
    finalize_later()
    ours = Trace.objects.get(team=world.team)
    theirs = Trace.objects.get(team=world.other_team)
    assert ours.pk != theirs.pk
    assert ours.span_count == theirs.span_count == 5
    assert ours.pipeline == rag_pipeline
    assert theirs.pipeline is None
    assert not StageSample.objects.filter(team_id=world.other_team.pk).exists()


def test_a_trace_knows_which_days_hold_its_spans_and_finalizes_with_all_of_them(
    world: TeamWorld, rag_pipeline
) -> None:
    day = datetime.fromtimestamp(T0 / S, tz=UTC).date()
    span_store().days_prepare(day - timedelta(days=1), day + timedelta(days=3))
    spans = rag_spans(TRACE)
    # A child whose clock is two days ahead lands in another day partition.
    skewed = span(
        0x21, ROOT, T0 + 2 * DAY, T0 + 2 * DAY + 5 * MS, name="auth.retry", trace_id=TRACE
    )
    store(world.team, spans[:3])
    raw_batches_drain()
    store(world.team, [*spans[3:], skewed])
    raw_batches_drain()

    trace = Trace.objects.get()
    assert (trace.first_span_start_ns, trace.last_span_start_ns) == (T0, T0 + 2 * DAY)
    assert finalize_later() == 1
    auth = StageSample.objects.get(
        trace_pk=trace.pk, stage_id=rag_pipeline.stages.get(slug="auth").pk
    )
    assert auth.span_count == 2  # the skewed child was read back too
    assert auth.wall_ns == 55 * MS
