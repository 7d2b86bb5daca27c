"""One team's trace that breaks or stalls analysis is quarantined; every other is analyzed."""

from django.core.management import call_command
from django.db import connection

from apps.analysis.models import StageSample
from apps.analysis.services.finalize import traces_finalize_due
from apps.core.models import QuarantinedItem, QuarantineKind
from apps.ingest.models import ANALYZED_STATES, Trace, TraceState
from tests.builders.configuration import make_pipeline, make_rule, make_stage
from tests.builders.spans import span
from tests.builders.stored_spans import stored_span
from tests.conftest import TeamWorld
from tests.rollups.hostile import (
    broken_trace,
    chat_requests,
    go_quiet,
    ingest,
    late_span,
    one_trace,
    rag_pipeline,
    traces_of,
    wide_trace,
)

TTFC = "gen_ai.response.time_to_first_chunk"


def hostile_pipeline(world: TeamWorld) -> None:
    """The attacker's own pipeline, with a rule that backtracks catastrophically on re."""
    pipeline = make_pipeline(world.other_team, "evil", match_root_span="POST /chat")
    ttft = make_stage(pipeline, "ttft", budget_ms=100)
    make_rule(ttft, span_name="^(a+)+$", name_match="regex", portion="until_first_token")
    make_rule(ttft, span_name="chat*", portion="until_first_token")


def test_victims_traces_are_analyzed_beside_poisoned_and_catastrophic_regex_traces(
    world: TeamWorld,
) -> None:
    rag_pipeline(world.team)
    hostile_pipeline(world)
    victims = chat_requests(world.team, first_id=1, count=50)
    regex = one_trace(world.other_team, 1001, child="a" * 40 + "!")
    # As stored by a release that did not check the range where it decoded.
    huge = one_trace(world.other_team, 1002, child="chat gpt", stored_json=f'{{"{TTFC}": 1e300}}')
    text = one_trace(world.other_team, 1003, child="chat gpt", stored_json=f'{{"{TTFC}": "1e300"}}')
    go_quiet()

    result = traces_finalize_due()

    assert result.traces + result.quarantined == 53
    analyzed = traces_of(world.team, victims)
    assert all(trace.state in ANALYZED_STATES for trace in analyzed)
    assert StageSample.objects.filter(team_id=world.team.pk).count() == 50
    # Their first token is unusable, not fatal: the trace is analyzed as if it had none.
    for trace in traces_of(world.other_team, [regex, huge, text]):
        assert trace.state in ANALYZED_STATES


def test_a_trace_whose_analysis_raises_is_quarantined_and_the_pass_commits_the_rest(
    world: TeamWorld,
) -> None:
    rag_pipeline(world.team)
    victims = chat_requests(world.team, first_id=1, count=20)
    broken = broken_trace(world.other_team, 2001)
    go_quiet()

    result = traces_finalize_due()

    assert (result.traces, result.quarantined) == (20, 1)
    assert all(t.state in ANALYZED_STATES for t in traces_of(world.team, victims))
    [trace] = traces_of(world.other_team, [broken])
    assert trace.state == TraceState.QUARANTINED
    item = QuarantinedItem.objects.get(kind=QuarantineKind.TRACE, item_id=trace.pk)
    assert item.team_id == world.other_team.pk
    assert "AttributeError" in item.reason
    assert item.times == 1


def test_a_quarantined_trace_is_never_picked_again_even_when_new_spans_arrive(
    world: TeamWorld,
) -> None:
    broken = broken_trace(world.other_team, 2001)
    traces_finalize_due()

    late_span(world.other_team, broken, 0x30)
    go_quiet()
    again = traces_finalize_due()

    assert (again.traces, again.quarantined) == (0, 0)
    [trace] = traces_of(world.other_team, [broken])
    assert trace.state == TraceState.QUARANTINED
    assert trace.span_count == 3  # the late span is stored all the same: nothing is lost


def test_a_released_trace_is_analyzed_again_and_quarantined_again_while_still_broken(
    world: TeamWorld,
) -> None:
    broken = broken_trace(world.other_team, 2001)
    traces_finalize_due()

    call_command("quarantine", "retry", "--kind", "trace")
    assert traces_finalize_due().quarantined == 1
    item = QuarantinedItem.objects.get(kind=QuarantineKind.TRACE)
    assert (item.times, item.released_at) == (2, None)

    # After the fix (here: the span sent again, sound and ending a nanosecond later: of
    # two copies of a span, analysis keeps the one that ends last), a retry analyzes it.
    damaged = stored_span((0x20).to_bytes(8, "big"), team=world.other_team)
    start, end = damaged.start_ns + 1, damaged.end_ns + 1
    sound = span(0x20, 0x10, start, end, name="retrieve docs", kind="client", trace_id=broken)
    ingest(world.other_team, [sound])
    go_quiet()
    call_command("quarantine", "retry", "--id", str(item.item_id))
    assert traces_finalize_due().traces == 1
    [trace] = traces_of(world.other_team, [broken])
    assert trace.state in ANALYZED_STATES
    item.refresh_from_db()
    assert item.released_at is not None


def test_a_trace_past_its_time_budget_is_interrupted_and_quarantined(
    world: TeamWorld, settings: object
) -> None:
    rag_pipeline(world.team)
    victims = chat_requests(world.team, first_id=1, count=20)
    pipeline, _ = rag_pipeline(world.other_team)
    make_rule(make_stage(pipeline, "tools", budget_ms=100), span_name="tool call *")
    # Wider than a trace may be by default: its analysis must run past the time budget.
    settings.INGEST_MAX_SPANS_PER_TRACE = 20_000  # type: ignore[attr-defined]
    slow = wide_trace(world.other_team, 3001, spans=20_000)
    go_quiet()
    settings.TRACE_ANALYSIS_TIME_BUDGET_S = 0.05  # type: ignore[attr-defined]

    result = traces_finalize_due()

    assert (result.traces, result.quarantined) == (20, 1)
    assert all(t.state in ANALYZED_STATES for t in traces_of(world.team, victims))
    [trace] = traces_of(world.other_team, [slow])
    assert trace.state == TraceState.QUARANTINED
    reason = QuarantinedItem.objects.get(item_id=trace.pk).reason
    assert reason == "ran past its time budget of 0.05 s"


def test_a_trace_whose_rows_the_database_refuses_is_quarantined_alone(world: TeamWorld) -> None:
    pipeline, _ = rag_pipeline(world.team)
    victims = chat_requests(world.team, first_id=1, count=20)
    rag_pipeline(world.other_team)
    refused = chat_requests(world.other_team, first_id=5001, count=2)
    go_quiet()
    with connection.cursor() as cursor:
        # A real refusal by PostgreSQL for the other team's samples only.
        cursor.execute(
            f"""
            CREATE FUNCTION refuse_samples() RETURNS trigger AS $$
            BEGIN
                IF NEW.team_id = {world.other_team.pk} THEN
                    RAISE EXCEPTION 'sample refused';
                END IF;
                RETURN NEW;
            END $$ LANGUAGE plpgsql;
            CREATE TRIGGER refuse_samples BEFORE INSERT ON analysis_stagesample
                FOR EACH ROW EXECUTE FUNCTION refuse_samples();
            """
        )

    result = traces_finalize_due()

    assert (result.traces, result.quarantined) == (20, 2)
    assert StageSample.objects.filter(pipeline_id=pipeline.pk).count() == 20
    assert all(t.state in ANALYZED_STATES for t in traces_of(world.team, victims))
    for trace in traces_of(world.other_team, refused):
        assert trace.state == TraceState.QUARANTINED
        assert "sample refused" in QuarantinedItem.objects.get(item_id=trace.pk).reason
    assert not Trace.objects.filter(state=TraceState.OPEN).exists()
