"""Shared passes are bounded by bytes as well as spans: the drain, a trace, an analysis pass."""

import hashlib
import tracemalloc
from datetime import timedelta

from django.utils import timezone

from apps.analysis.services.finalize import traces_finalize_due
from apps.ingest.decoding import decode_otlp_protobuf
from apps.ingest.models import RawBatch, Trace
from apps.ingest.services.batches import accepted_batch_store, raw_batches_drain
from apps.teams.models import Team
from tests.builders.spans import T0, HandSpan, encode, span
from tests.builders.stored_spans import stored_span_ids, stored_spans
from tests.conftest import TeamWorld
from tests.timing import MS

MIB = 1024 * 1024


def _incompressible(length: int) -> str:
    """Text the database's compression cannot shrink much: hex digests."""
    digests = (hashlib.sha256(str(i).encode()).hexdigest() for i in range(length // 64 + 1))
    return "".join(digests)[:length]


def _store(world: TeamWorld, spans: list[HandSpan], *, team: Team | None = None) -> RawBatch:
    return accepted_batch_store(
        team=team or world.team, token=None, decoded=decode_otlp_protobuf(encode(spans))
    )


def _big_batch(world: TeamWorld, trace: int, size: int) -> RawBatch:
    """One trace of a root and a child carrying ``size`` characters in attributes."""
    values = {f"v{i}": "x" * 16_000 for i in range(size // 16_000)}
    return _store(
        world,
        [
            span(1, None, T0, T0 + 10 * MS, name="root", trace_id=trace),
            span(2, 1, name="child", attributes=values, trace_id=trace),
        ],
    )


def test_a_drain_pass_loads_at_most_its_byte_budget_of_batches(world: TeamWorld) -> None:
    for trace in range(1, 9):
        _big_batch(world, trace, MIB)  # eight batches of about a megabyte each

    tracemalloc.start()
    try:
        first = raw_batches_drain(max_bytes=5 * MIB // 2)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert first.batches == 2  # a third would pass two and a half megabytes
    assert peak < 12 * MIB  # the pass held a few bodies, never all eight
    passes = 1
    while raw_batches_drain(max_bytes=5 * MIB // 2).more:
        passes += 1
    assert passes == 4
    assert len(stored_spans()) == 16


def test_a_batch_larger_than_the_byte_budget_is_drained_alone(world: TeamWorld) -> None:
    _big_batch(world, 1, MIB)
    _big_batch(world, 2, MIB)

    result = raw_batches_drain(max_bytes=MIB // 2)

    assert result.batches == 1
    assert RawBatch.objects.count() == 1


def test_a_full_trace_takes_no_more_spans_and_counts_those_it_refused(
    world: TeamWorld, settings
) -> None:
    settings.INGEST_MAX_SPANS_PER_TRACE = 5
    _store(world, [span(1, None, T0, T0 + 100 * MS)] + [span(i, 1) for i in range(2, 7)])
    raw_batches_drain()  # six spans, one more than the trace may hold
    _store(world, [span(i, 1) for i in range(10, 13)])
    _store(world, [span(i, 1) for i in range(1, 3)], team=world.other_team)

    raw_batches_drain()

    trace = Trace.objects.get(team=world.team)
    assert (trace.span_count, trace.spans_dropped) == (5, 4)
    assert len(stored_spans(team=world.team)) == 5
    # The root comes first, then the spans by start: the last to start was refused.
    assert trace.root_span_id is not None
    assert (6).to_bytes(8) not in stored_span_ids(team=world.team)
    # Another team's trace with the same id is its own, and not full.
    assert Trace.objects.get(team=world.other_team).span_count == 2


def test_a_trace_knows_about_how_many_bytes_its_spans_hold(world: TeamWorld) -> None:
    _big_batch(world, 1, 160_000)
    raw_batches_drain()
    _store(world, [span(3, 1, name="late", attributes={"a": "y" * 50_000}, trace_id=1)])
    raw_batches_drain()

    trace = Trace.objects.get()
    assert trace.span_count == 3
    # jsonb compresses long repeated strings: the count is the stored size, not as sent.
    assert 1_000 < trace.byte_count < 210_000
    assert len(stored_spans(trace=trace)) == 3


def test_an_analysis_pass_takes_traces_up_to_its_span_budget(world: TeamWorld, settings) -> None:
    settings.ANALYSIS_PASS_MAX_SPANS = 5
    for trace in range(1, 5):  # four traces of three spans
        spans = [span(1, None, T0, T0 + 10 * MS, trace_id=trace)]
        _store(world, spans + [span(i, 1, trace_id=trace) for i in (2, 3)])
    raw_batches_drain()
    later = timezone.now() + timedelta(minutes=10)

    counts = []
    while (result := traces_finalize_due(now=later)).traces:
        counts.append(result.traces)

    assert counts == [1, 1, 1, 1]


def test_an_analysis_pass_takes_traces_up_to_its_byte_budget(world: TeamWorld, settings) -> None:
    settings.ANALYSIS_PASS_MAX_BYTES = 10_000
    for trace in range(1, 4):
        _store(
            world,
            [
                span(1, None, T0, T0 + 10 * MS, trace_id=trace),
                span(2, 1, attributes={"a": _incompressible(20_000)}, trace_id=trace),
            ],
        )
    _store(world, [span(1, None, T0, T0 + 10 * MS, trace_id=9)])
    raw_batches_drain()
    later = timezone.now() + timedelta(minutes=10)

    counts = []
    while (result := traces_finalize_due(now=later)).traces:
        counts.append(result.traces)

    assert sum(counts) == 4
    assert max(counts) <= 2  # never two of the large traces in one pass
