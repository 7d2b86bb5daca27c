"""Retention drops whole days of spans on either span store and deletes rows elsewhere."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.utils import timezone

from apps.core.partitions import partitions_of
from apps.core.time import day_start_ns
from apps.ingest.models import Encoding, Span, Trace
from apps.ingest.services.batches import raw_batch_store, raw_batches_drain
from apps.ingest.services.storage import storage_maintain
from tests.builders.spans import encode, span
from tests.builders.stored_spans import stored_spans
from tests.conftest import TeamWorld
from tests.timing import MS, S


def _ns(day: datetime) -> int:
    return int(day.timestamp()) * S


def store_span_at(
    world: TeamWorld, start_ns: int, span_id: int, *, parent: int | None = None, trace: int = 0
) -> None:
    """A span of one millisecond, stored; its trace's id is its own unless ``trace`` is given."""
    spans = [
        span(span_id, parent, start_ns, start_ns + MS, name="POST /chat", trace_id=trace or span_id)
    ]
    raw_batch_store(
        team=world.team, token=None, encoding=Encoding.OTLP_PROTOBUF, body=encode(spans),
        span_count=1,
    )  # fmt: skip
    raw_batches_drain()


# PostgreSQL's own day partitions and the default one that takes rows until their day's
# is made; ClickHouse makes a day's partition with its first span.
@pytest.mark.postgres_spans
def test_maintenance_creates_day_partitions_and_moves_waiting_rows_into_them(
    world: TeamWorld,
) -> None:
    today = timezone.now().date()
    tomorrow_noon = datetime(today.year, today.month, today.day, 12, tzinfo=UTC) + timedelta(1)
    store_span_at(world, _ns(tomorrow_noon), 0x1)  # lands in the default partition for now

    result = storage_maintain()

    days = partitions_of("ingest_span")
    assert {today - timedelta(1), today, today + timedelta(1), today + timedelta(2)} <= set(days)
    assert f"ingest_span_p{today + timedelta(1):%Y%m%d}" in result.created
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM ingest_span_default")
        assert cursor.fetchone()[0] == 0
        cursor.execute(f'SELECT count(*) FROM "ingest_span_p{today + timedelta(1):%Y%m%d}"')
        assert cursor.fetchone()[0] == 1
    assert storage_maintain().created == []  # idempotent


def test_retention_drops_the_spans_of_expired_days_and_keeps_recent_ones(
    world: TeamWorld, settings
) -> None:
    settings.SPAN_RETENTION_DAYS = 7
    today = timezone.now().date()
    store_span_at(world, day_start_ns(today - timedelta(days=9)) + 5, 0x2)
    store_span_at(world, day_start_ns(today - timedelta(days=3)) + 5, 0x3)
    store_span_at(world, day_start_ns(today - timedelta(days=30)), 0x4)

    storage_maintain()

    kept = {bytes(t.trace_id) for t in Trace.objects.all() if stored_spans(trace=t)}
    assert kept == {(0x3).to_bytes(16, "big")}


def test_spans_are_stored_as_before_once_retention_dropped_expired_days(
    world: TeamWorld, settings
) -> None:
    settings.SPAN_RETENTION_DAYS = 7
    today = timezone.now().date()
    store_span_at(world, day_start_ns(today - timedelta(days=9)) + 5, 0x2)
    storage_maintain()

    now = day_start_ns(today) + 5
    store_span_at(world, now, 0x10, trace=0x5)
    # The trace has spans now: this drain looks up what it already holds.
    store_span_at(world, now + MS, 0x11, parent=0x10, trace=0x5)

    trace = Trace.objects.get(trace_id=(0x5).to_bytes(16, "big"))
    assert trace.span_count == len(stored_spans(trace=trace)) == 2


# PostgreSQL's day partitions, made here by hand, dropped whole by name.
@pytest.mark.postgres_spans
def test_retention_drops_expired_day_partitions_and_keeps_recent_ones(
    world: TeamWorld, settings
) -> None:
    settings.SPAN_RETENTION_DAYS = 7
    today = timezone.now().date()
    old_day = today - timedelta(days=9)
    recent_day = today - timedelta(days=3)
    with connection.cursor() as cursor:
        for day in (old_day, recent_day):
            low, high = day_start_ns(day), day_start_ns(day + timedelta(1))
            cursor.execute(
                f'CREATE TABLE "ingest_span_p{day:%Y%m%d}" PARTITION OF ingest_span '
                f"FOR VALUES FROM ({low}) TO ({high})"
            )
    store_span_at(world, day_start_ns(old_day) + 5, 0x2)
    store_span_at(world, day_start_ns(recent_day) + 5, 0x3)
    store_span_at(world, day_start_ns(today - timedelta(days=30)), 0x4)  # in the default one

    result = storage_maintain()

    assert f"ingest_span_p{old_day:%Y%m%d}" in result.dropped
    assert recent_day in partitions_of("ingest_span")
    assert old_day not in partitions_of("ingest_span")
    assert list(Span.objects.values_list("trace_id", flat=True)) == [(0x3).to_bytes(16, "big")]


def test_traces_older_than_sample_retention_are_deleted(world: TeamWorld, settings) -> None:
    settings.SAMPLE_RETENTION_DAYS = 30
    store_span_at(world, day_start_ns(timezone.now().date()), 0x7)
    Trace.objects.update(last_span_at=timezone.now() - timedelta(days=31))
    store_span_at(world, day_start_ns(timezone.now().date()), 0x8)
    storage_maintain()
    assert list(Trace.objects.values_list("trace_id", flat=True)) == [(0x8).to_bytes(16, "big")]
