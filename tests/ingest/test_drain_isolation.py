"""A batch the drain cannot store is set aside; every other batch is stored in the same pass."""

from django.core.management import call_command

from apps.core.models import QuarantinedItem, QuarantineKind
from apps.ingest.models import Encoding, RawBatch, Trace
from apps.ingest.services.batches import raw_batch_store, raw_batches_drain
from tests.builders.otlp_samples import sample_spans
from tests.builders.spans import encode
from tests.builders.stored_spans import stored_spans
from tests.conftest import TeamWorld


def good_batch(world: TeamWorld) -> RawBatch:
    spans = sample_spans()
    return raw_batch_store(
        team=world.team, token=None, encoding=Encoding.OTLP_PROTOBUF, body=encode(spans),
        span_count=len(spans),
    )  # fmt: skip


def corrupt_rows_batch(world: TeamWorld) -> RawBatch:
    """Span rows PostgreSQL's COPY refuses: a row that claims more columns than it has."""
    return raw_batch_store(
        team=world.other_team, token=None, encoding=Encoding.SPAN_ROWS,
        body=b"\x00\x10\xff\xff\xff\xff", span_count=1,
    )  # fmt: skip


def test_a_corrupt_batch_is_quarantined_and_the_others_are_stored(world: TeamWorld) -> None:
    before = good_batch(world)
    bad = corrupt_rows_batch(world)
    after = good_batch(world)

    result = raw_batches_drain()

    assert (result.batches, result.failed_batches) == (2, 1)
    assert len(stored_spans(team=world.team)) == len(sample_spans())
    assert not RawBatch.objects.filter(pk__in=[before.pk, after.pk]).exists()
    kept = RawBatch.objects.get(pk=bad.pk)
    assert kept.last_error
    assert kept.attempts == 1
    item = QuarantinedItem.objects.get(kind=QuarantineKind.RAW_BATCH, item_id=bad.pk)
    assert item.team_id == world.other_team.pk
    assert item.reason == kept.last_error


def test_a_quarantined_batch_stays_out_of_later_drains(world: TeamWorld) -> None:
    corrupt_rows_batch(world)
    raw_batches_drain()
    good_batch(world)

    result = raw_batches_drain()

    assert (result.batches, result.failed_batches) == (1, 0)
    assert Trace.objects.filter(team=world.team).count() == 1


def test_a_retried_batch_is_drained_again_and_counted_again_when_it_fails(
    world: TeamWorld,
) -> None:
    bad = corrupt_rows_batch(world)
    raw_batches_drain()

    call_command("quarantine", "retry", "--kind", "raw_batch")
    assert RawBatch.objects.get(pk=bad.pk).last_error == ""
    result = raw_batches_drain()

    assert result.failed_batches == 1
    assert RawBatch.objects.get(pk=bad.pk).attempts == 2
    assert QuarantinedItem.objects.get(item_id=bad.pk).times == 2


def test_a_drain_of_only_corrupt_batches_says_there_may_be_more(world: TeamWorld) -> None:
    corrupt_rows_batch(world)

    result = raw_batches_drain()

    assert result.more  # the drain task keeps going instead of leaving batches behind
    assert not raw_batches_drain().more
