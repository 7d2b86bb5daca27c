"""A batch whose drains keep dying with their worker is tried alone, then quarantined."""

from datetime import timedelta

import pytest
from django.db import OperationalError, connection
from django.utils import timezone

from apps.analysis.services.finalize import traces_finalize_due
from apps.core.crash_guard import claim_open, crash_strikes
from apps.core.models import CrashStrike, PassClaim, QuarantinedItem, QuarantineKind
from apps.ingest.decoding import decode_otlp_protobuf
from apps.ingest.models import RawBatch, Span, Trace, TraceState
from apps.ingest.services import batches
from apps.ingest.services.batches import accepted_batch_store, raw_batches_drain
from tests.builders.spans import encode, span
from tests.conftest import TeamWorld

KIND = QuarantineKind.RAW_BATCH


def _batch(world: TeamWorld, trace: int) -> RawBatch:
    decoded = decode_otlp_protobuf(encode([span(1, trace_id=trace), span(2, 1, trace_id=trace)]))
    return accepted_batch_store(team=world.team, token=None, decoded=decoded)


def _died_holding(*batches_held: RawBatch) -> None:
    """What a drain whose worker was killed leaves: its claim, from a session now gone."""
    PassClaim.objects.create(
        kind=KIND,
        item_ids=[b.pk for b in batches_held],
        backend_pid=0,  # no backend has pid 0
        backend_start=timezone.now(),
        claimed_at=timezone.now(),
    )


def test_a_drain_that_finishes_leaves_no_claim(world: TeamWorld) -> None:
    _batch(world, 1)

    assert raw_batches_drain().batches == 1
    assert not PassClaim.objects.exists()


def test_a_drain_that_raises_leaves_no_claim_and_no_strike(
    world: TeamWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    _batch(world, 1)

    def refuse(*args: object, **kwargs: object) -> None:
        raise OperationalError("the database went away")

    monkeypatch.setattr(batches.RawBatchDrain, "begin", refuse)
    with pytest.raises(OperationalError):
        raw_batches_drain()

    assert not PassClaim.objects.exists()
    assert crash_strikes(kind=KIND) == {}


def test_the_claim_of_a_live_session_is_not_a_crash(world: TeamWorld) -> None:
    batch = _batch(world, 1)
    claim_open(kind=KIND, item_ids=[batch.pk])  # this session's own: alive

    assert crash_strikes(kind=KIND) == {}
    assert PassClaim.objects.count() == 1


def test_after_a_drain_died_its_batches_are_drained_one_at_a_time(world: TeamWorld) -> None:
    first, second = _batch(world, 1), _batch(world, 2)
    _died_holding(first, second)
    later = _batch(world, 3)

    runs = []
    while (result := raw_batches_drain()).more:
        runs.append(result.batches)

    assert runs[:2] == [1, 1]  # the two suspects alone, then the rest together
    assert Span.objects.count() == 6
    assert not RawBatch.objects.filter(pk__in=[first.pk, second.pk, later.pk]).exists()
    assert not CrashStrike.objects.exists()
    assert not QuarantinedItem.objects.exists()


def test_a_batch_whose_drains_died_twice_is_quarantined_and_the_rest_stored(
    world: TeamWorld,
) -> None:
    killer, innocent = _batch(world, 1), _batch(world, 2)
    _died_holding(killer, innocent)
    _died_holding(killer)  # then tried alone, it killed that worker too

    while raw_batches_drain().more:
        pass

    kept = RawBatch.objects.get()
    assert kept.pk == killer.pk
    assert "stopped without finishing 2 times" in kept.last_error
    item = QuarantinedItem.objects.get(kind=KIND, item_id=killer.pk)
    assert item.team_id == world.team.pk
    assert not RawBatch.objects.filter(pk=innocent.pk).exists()
    assert not CrashStrike.objects.exists()


def test_claims_name_the_session_by_pid_and_start(world: TeamWorld) -> None:
    batch = _batch(world, 1)
    claim_open(kind=KIND, item_ids=[batch.pk])

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (pid,) = cursor.fetchone()
    claim = PassClaim.objects.get()
    assert claim.backend_pid == pid
    assert claim.backend_start is not None
    assert claim.item_ids == [batch.pk]


def test_a_trace_whose_analysis_died_twice_is_quarantined_and_the_rest_analyzed(
    world: TeamWorld,
) -> None:
    for trace in (1, 2, 3):
        _batch(world, trace)
    raw_batches_drain()
    killer, innocent, other = Trace.objects.order_by("id")
    for held in ([killer.pk, innocent.pk], [killer.pk]):
        PassClaim.objects.create(
            kind=QuarantineKind.TRACE, item_ids=held, backend_pid=0,
            backend_start=timezone.now(), claimed_at=timezone.now(),
        )  # fmt: skip
    later = timezone.now() + timedelta(minutes=10)

    passes = []
    while (result := traces_finalize_due(now=later)).traces or result.quarantined:
        passes.append((result.traces, result.quarantined))

    assert passes == [(0, 1), (1, 0), (1, 0)]  # the killer set aside, the innocent alone
    states = dict(Trace.objects.values_list("id", "state"))
    assert states[killer.pk] == TraceState.QUARANTINED
    assert states[innocent.pk] != TraceState.OPEN
    assert states[other.pk] != TraceState.OPEN
    reason = QuarantinedItem.objects.get(kind=QuarantineKind.TRACE, item_id=killer.pk).reason
    assert "the worker died" in reason


def test_batches_another_live_drain_claimed_are_left_to_it(world: TeamWorld) -> None:
    theirs, mine = _batch(world, 1), _batch(world, 2)
    claim_open(kind=KIND, item_ids=[theirs.pk])  # a drain in another process, running

    result = raw_batches_drain()

    assert result.batches == 1
    assert list(RawBatch.objects.values_list("pk", flat=True)) == [theirs.pk]
    assert mine.pk not in RawBatch.objects.values_list("pk", flat=True)
