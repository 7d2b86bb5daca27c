"""Raw batch bodies are compressed with lz4 where the server has it, stored as they are
where not (pglz costs more than it saves), and come back to the drain as committed."""

import random

import pytest
from django.db import DatabaseError, connection, transaction

from apps.ingest.models import Encoding, RawBatch
from apps.ingest.services.batches import raw_batch_store
from tests.conftest import TeamWorld


def server_has_lz4() -> bool:
    """Whether this server was built with lz4: it refuses the setting otherwise."""
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SET LOCAL default_toast_compression = 'lz4'")
    except DatabaseError:
        return False
    return True


def test_the_body_column_asks_for_lz4_where_the_server_has_it(db: None) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT attcompression, attstorage FROM pg_attribute "
            "WHERE attrelid = %s::regclass AND attname = 'body'",
            [RawBatch._meta.db_table],
        )
        method, storage = cursor.fetchone()
    assert (method, storage) == (("l", "x") if server_has_lz4() else ("", "e"))


def test_a_large_body_is_compressed_where_it_can_be_and_read_back_whole(world: TeamWorld) -> None:
    rng = random.Random(7)
    # Half random bytes, half repeated text: compressible, and far past the 2 kB at which
    # PostgreSQL compresses a value.
    body = b"".join(rng.randbytes(64) + b'{"gen_ai.request.model": "gpt-4o"}' * 4
                    for _ in range(2_000))  # fmt: skip
    batch = raw_batch_store(
        team=world.team, token=None, encoding=Encoding.OTLP_PROTOBUF, body=body, span_count=1
    )
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_column_compression(body), pg_column_size(body) "
            f"FROM {RawBatch._meta.db_table} WHERE id = %s",
            [batch.pk],
        )
        method, stored = cursor.fetchone()
    if server_has_lz4():
        assert (method, stored < len(body) * 0.8) == ("lz4", True)
    else:
        assert (method, stored) == (None, len(body))
    assert bytes(RawBatch.objects.get(pk=batch.pk).body) == body


@pytest.mark.parametrize("size", [0, 1, 2_047, 2_048, 300_000])
def test_bodies_of_every_size_come_back_as_committed(world: TeamWorld, size: int) -> None:
    body = random.Random(size).randbytes(size)  # incompressible: stored as it is
    batch = raw_batch_store(
        team=world.team, token=None, encoding=Encoding.OTLP_PROTOBUF, body=body, span_count=1
    )
    assert bytes(RawBatch.objects.get(pk=batch.pk).body) == body
