"""The drain task: leases keep drains from taking every worker process."""

import pytest
from django.core.cache import cache

from apps.ingest.decoding import decode_otlp_protobuf
from apps.ingest.models import RawBatch
from apps.ingest.services.batches import accepted_batch_store
from apps.ingest.tasks import DRAIN_LEASE_KEY, drain_raw_batches
from tests.builders.stored_spans import stored_spans
from tests.conftest import TeamWorld
from tests.ingest.endpoint_helpers import protobuf_batch

pytestmark = pytest.mark.usefixtures("clean_cache")


def pending(world: TeamWorld, batches: int = 2) -> None:
    for n in range(batches):
        body = protobuf_batch(3, trace_id=0xA0 + n)
        accepted_batch_store(
            team=world.team,
            token=None,
            decoded=decode_otlp_protobuf(body),
        )


def test_a_drain_stores_every_pending_batch_and_gives_its_lease_back(world: TeamWorld) -> None:
    pending(world)

    drain_raw_batches()

    assert not RawBatch.objects.exists()
    assert len(stored_spans()) == 6
    assert cache.get(DRAIN_LEASE_KEY.format(slot=0)) is None


def test_a_drain_leaves_the_batches_to_the_one_holding_the_lease(world: TeamWorld) -> None:
    pending(world)
    cache.add(DRAIN_LEASE_KEY.format(slot=0), 1, timeout=30)

    drain_raw_batches()

    assert RawBatch.objects.count() == 2
    assert not stored_spans()
    assert cache.get(DRAIN_LEASE_KEY.format(slot=0)) == 1  # not released by another task


def test_more_concurrent_drains_use_further_lease_slots(world: TeamWorld, settings) -> None:
    settings.INGEST_DRAIN_CONCURRENCY = 2
    pending(world)
    cache.add(DRAIN_LEASE_KEY.format(slot=0), 1, timeout=30)

    drain_raw_batches()

    assert not RawBatch.objects.exists()
    assert cache.get(DRAIN_LEASE_KEY.format(slot=1)) is None
