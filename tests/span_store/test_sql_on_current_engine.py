"""The ClickHouse span store's SQL on a current engine: chdb in this process stands in
for one server (no cluster), reached through a stand-in for the driver's client
(``tests.builders.chdb_client``). The cluster tests run the same SQL on Debian's 18.16;
here the schema, the drain's writes and lookups and every read run on a current engine,
and give what PostgreSQL gives for the same traffic."""

import io
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from clickhouse_driver.errors import ServerException
from django.core.management import call_command
from django.test import override_settings
from django.utils import timezone

from apps.analysis.services.finalize import traces_finalize_due
from apps.analysis.span_projection import span_projection
from apps.ingest.models import Trace
from apps.ingest.services.batches import raw_batches_drain
from apps.ingest.span_store import clickhouse_client, span_store
from apps.ingest.span_store.clickhouse import ClickHouseSpanStore, day_of
from apps.ingest.span_store.clickhouse_client import ClickHouseConfig, clickhouse_config
from apps.ingest.span_store.clickhouse_schema import SPAN_COLUMNS, schema_statements
from apps.ingest.span_store.postgres import PostgresSpanStore
from apps.rollups.services.bucket_pass import rollups_process_dirty
from apps.teams.models import Team
from tests.analysis.test_span_projection import matcher_of, stored_trace
from tests.builders.chdb_client import ChdbClient, chdb_engine
from tests.builders.ingested_traces import ingest, make_rag_pipeline, now_ns
from tests.builders.spans import HandSpan, rag_spans, span
from tests.conftest import TeamWorld, team_world
from tests.span_store.test_clickhouse_store import figures, send, whole
from tests.timing import DAY, MS

pytestmark = pytest.mark.django_db

DATABASE = "spans_chdb"
URL = f"clickhouse://default:@localhost:9000/{DATABASE}"
# Ids and texts that need escaping: a quote, a backslash, a newline, a zero byte, 0xff.
AWKWARD_TRACE = int.from_bytes(b"\x00'\\\n\xff" + bytes(range(1, 12)), "big")
AWKWARD_SPAN = int.from_bytes(b"'\\\x00\n\xff\x01\x02\x03", "big")
AWKWARD_TEXT = "it's a \\ back-slash, naïve ✓, a\ttab, a\nnewline, \U0001f600"


@pytest.fixture(scope="session")
def engine_client() -> ChdbClient:
    """The driver's stand-in on the run's one engine, the store's database made anew."""
    client = ChdbClient(chdb_engine())
    client.client_settings["strings_as_bytes"] = True  # as ``_client`` sets the driver's
    client.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
    return client


@pytest.fixture
def on_chdb(engine_client: ChdbClient, monkeypatch: pytest.MonkeyPatch) -> Iterator[ChdbClient]:
    """The store at ``URL`` (any ``insert_quorum``) talks to the engine; schema made."""

    def client_for(config: ClickHouseConfig) -> ChdbClient:
        assert (config.database, config.cluster) == (DATABASE, "")
        return engine_client

    monkeypatch.setattr(clickhouse_client, "_client", client_for)
    with override_settings(SPAN_STORE_URL=URL):
        call_command("span_store_migrate", verbosity=0)
        engine_client.sent.clear()
        engine_client.refused.clear()
        yield engine_client


def test_the_schema_is_made_and_made_again_without_change(on_chdb: ChdbClient) -> None:
    tables = f"SELECT name FROM system.tables WHERE database = '{DATABASE}' ORDER BY name"
    made = {t: on_chdb.execute(f"SHOW CREATE TABLE {DATABASE}.{t.decode()}") for (t,) in
            on_chdb.execute(tables)}  # fmt: skip
    out = io.StringIO()

    call_command("span_store_migrate", stdout=out)

    assert "database spans_chdb on one server (5 statements)" in out.getvalue()
    assert "No trace_search_hashes index: the clickhouse store keeps" in out.getvalue()
    assert on_chdb.sent[-5:] == list(schema_statements(clickhouse_config(URL)))
    assert {t: on_chdb.execute(f"SHOW CREATE TABLE {DATABASE}.{t.decode()}") for (t,) in
            on_chdb.execute(tables)} == made  # fmt: skip
    assert on_chdb.execute(
        "SELECT name, engine, partition_key, sorting_key FROM system.tables "
        f"WHERE database = '{DATABASE}' ORDER BY name"
    ) == [
        (b"span_batches", b"ReplacingMergeTree", b"day", b"(batch_id)"),
        (b"spans", b"ReplacingMergeTree", b"day", b"team_id, trace_id, span_id, start_ns"),
        (b"trace_sets", b"ReplacingMergeTree", b"day",
         b"team_id, start_ns, trace_pk, duration_ns, set_hash"),
    ]  # fmt: skip
    columns = on_chdb.execute(
        "SELECT name, type FROM system.columns "
        f"WHERE database = '{DATABASE}' AND table = 'spans' ORDER BY position"
    )
    assert [(n.decode(), t.decode()) for n, t in columns] == list(SPAN_COLUMNS)
    assert on_chdb.refused == []


def test_the_first_schema_s_table_of_search_elements_is_dropped(on_chdb: ChdbClient) -> None:
    on_chdb.execute(
        f"CREATE TABLE {DATABASE}.trace_search (day Date, team_id Int64, hash Int64) "
        "ENGINE = ReplacingMergeTree() PARTITION BY day ORDER BY (team_id, hash)"
    )

    call_command("span_store_migrate", verbosity=0)
    call_command("span_store_migrate", verbosity=0)  # and nothing to drop the second time

    names = on_chdb.execute(f"SELECT name FROM system.tables WHERE database = '{DATABASE}'")
    assert sorted(n.decode() for (n,) in names) == ["span_batches", "spans", "trace_sets"]
    assert on_chdb.refused == []


def awkward_spans(t0: int) -> list[HandSpan]:
    """A trace whose ids and texts need every kind of escaping."""
    return [
        span(AWKWARD_SPAN, None, t0, t0 + 80 * MS, name="POST /chat", kind="server",
             attributes={AWKWARD_TEXT: AWKWARD_TEXT, "n": 2**62, "list": ["'", "\\"]},
             trace_id=AWKWARD_TRACE),
        span(0x27, AWKWARD_SPAN, t0 + 5 * MS, t0 + 60 * MS, name=AWKWARD_TEXT,
             service="chat-api", kind="client", attributes={"gen_ai.operation.name": "chat"},
             events=[("first_token", t0 + 20 * MS, {"quote": "'", "text": AWKWARD_TEXT})],
             status="error", message=AWKWARD_TEXT, trace_id=AWKWARD_TRACE),
    ]  # fmt: skip


def send_in_steps(team: Team, t0: int) -> None:
    """RAG traces and the awkward one over two drains: some traces' roots come in the
    second (a batch for a trace holding spans), and a batch is sent again in each."""
    traces = [rag_spans(0xC000 + i, t0 + i * 1000 * MS, llm_error=i == 3) for i in range(6)]
    traces.append(awkward_spans(t0))
    first = [spans[1:] if i % 2 else spans for i, spans in enumerate(traces)]
    for spans in [*first, first[0]]:
        send(team, spans)
    raw_batches_drain()
    for spans in [*(spans[:1] for spans in traces[1::2]), first[2]]:
        send(team, spans)
    while raw_batches_drain().more:
        pass
    traces_finalize_due(now=timezone.now() + timedelta(hours=1))
    while rollups_process_dirty().buckets:
        pass


def test_the_same_traffic_gives_the_same_traces_samples_and_rollups(
    world: TeamWorld, on_chdb: ChdbClient
) -> None:
    other = team_world("-chdb")
    for team in (world.team, other.team):
        make_rag_pipeline(team)
    t0 = now_ns() - 600_000 * MS
    with override_settings(SPAN_STORE_URL=""):
        send_in_steps(world.team, t0)
    send_in_steps(other.team, t0)

    assert isinstance(span_store(), ClickHouseSpanStore)
    on_postgres, on_engine = figures(world.team), figures(other.team)
    assert len(on_postgres["traces"]) == 7
    assert len(on_postgres["samples"]) > 20
    assert on_engine == on_postgres
    # Each span stored once: the resent batches and the second drain's lookups found them.
    ((rows, unique),) = on_chdb.execute(
        f"SELECT count(), uniqExact(trace_id, span_id, start_ns) FROM {DATABASE}.spans "
        f"WHERE team_id = {other.team.pk}"
    )
    assert (rows, unique) == (6 * 5 + 2, 6 * 5 + 2)
    lookup = f"SELECT team_id, trace_id, span_id, start_ns, batch_id FROM {DATABASE}.spans "
    assert any(sql.startswith(lookup) for sql in on_chdb.sent)
    assert on_chdb.refused == []


def test_reads_give_what_postgresql_gives(world: TeamWorld, on_chdb: ChdbClient) -> None:
    other = team_world("-chdb")
    matcher = matcher_of(world)
    t0 = now_ns() - 60_000 * MS

    def stored(team_world: TeamWorld) -> list[Trace]:
        ingest(team_world.team, awkward_spans(t0 - 1000 * MS))
        awkward = Trace.objects.get(team=team_world.team, trace_id=AWKWARD_TRACE.to_bytes(16))
        return [stored_trace(team_world, 0xE1, t0), awkward]

    with override_settings(SPAN_STORE_URL=""):
        on_postgres = stored(world)
    on_engine = stored(other)
    store, postgres = span_store(), PostgresSpanStore()
    projection = span_projection(matcher.rules)

    def same(rows: list[Any], traces: list[Trace]) -> list[Any]:
        index = {trace.pk: i for i, trace in enumerate(traces)}
        return sorted(
            (index[row[0]], *(bytes(v) if isinstance(v, memoryview) else v for v in row[1:]))
            for row in rows
        )

    for trace_ch, trace_pg in zip(on_engine, on_postgres, strict=True):
        assert whole(store.spans_of_traces([trace_ch])) == whole(
            postgres.spans_of_traces([trace_pg])
        )
    assert len(store.spans_of_traces(on_engine)) == 12 + 2
    read_ch = store.spans_projected(on_engine, projection, 2**30)
    read_pg = postgres.spans_projected(on_postgres, projection, 2**30)
    assert same(read_ch.rows, on_engine) == same(read_pg.rows, on_postgres)
    assert read_ch.bytes_read == read_pg.bytes_read
    # A budget that holds the first trace alone leaves the second out, on either store.
    first = postgres.spans_projected(on_postgres[:1], projection, 2**30).bytes_read
    assert store.spans_projected(on_engine, projection, first).left_out_from == on_engine[1].pk
    assert postgres.spans_projected(on_postgres, projection, first).left_out_from == (
        on_postgres[1].pk
    )
    for trace_ch, trace_pg in zip(on_engine, on_postgres, strict=True):
        for row in postgres.spans_projected([trace_pg], projection, 2**30).rows:
            span_id = bytes(row[1])
            start = postgres.span_start(trace_pg, span_id)
            assert start is not None
            assert store.span_start(trace_ch, span_id) == start
            assert store.span_content(trace_ch, span_id, start, chars=50, limit=20) == (
                postgres.span_content(trace_pg, span_id, start, chars=50, limit=20)
            )
        assert store.span_start(trace_ch, b"\xff" * 8) is None
    assert store.bytes_stored() > 0
    assert on_chdb.refused == []


def test_the_quorum_settings_are_taken_by_one_server_s_tables(
    world: TeamWorld, on_chdb: ChdbClient
) -> None:
    """A store told to insert with a quorum (``insert_quorum=2`` without a cluster)
    sends the quorum settings to plain ReplacingMergeTree tables, which take them."""
    t0 = now_ns() - 60_000 * MS
    spans = rag_spans(0xC1, t0)
    with override_settings(SPAN_STORE_URL=URL + "?insert_quorum=2"):
        send(world.team, spans[1:])
        raw_batches_drain()
        send(world.team, spans)
        raw_batches_drain()

    settings = "SETTINGS insert_distributed_sync = 1, insert_quorum = 2, insert_quorum_timeout"
    assert sum(settings in sql for sql in on_chdb.sent) == 4  # each drain's batches and spans
    assert Trace.objects.get(team=world.team).span_count == 5
    assert on_chdb.refused == []


def test_old_days_are_dropped_as_on_postgresql(world: TeamWorld, on_chdb: ChdbClient) -> None:
    other = team_world("-chdb")
    cutoff = timezone.now().date() - timedelta(days=7)
    old, new = now_ns() - 10 * DAY, now_ns() - 60_000 * MS

    def ingested(team: Team) -> list[Trace]:
        ingest(team, rag_spans(0xF1, old), rag_spans(0xF2, new))
        return [Trace.objects.get(team=team, trace_id=t.to_bytes(16)) for t in (0xF1, 0xF2)]

    with override_settings(SPAN_STORE_URL=""):
        on_postgres = ingested(world.team)
    on_engine = ingested(other.team)
    store, postgres = span_store(), PostgresSpanStore()
    before = store.bytes_stored()

    postgres.days_drop(cutoff)
    dropped = store.days_drop(cutoff)

    assert f"{DATABASE}.spans {day_of(old).isoformat()}" in dropped
    assert f"{DATABASE}.trace_sets {day_of(old).isoformat()}" in dropped
    assert store.spans_of_traces(on_engine[:1]) == postgres.spans_of_traces(on_postgres[:1]) == []
    assert whole(store.spans_of_traces(on_engine[1:])) == whole(
        postgres.spans_of_traces(on_postgres[1:])
    )
    assert store.bytes_stored() < before
    assert on_chdb.refused == []


def test_the_engine_gives_back_every_byte_and_text_it_was_given(
    engine_client: ChdbClient,
) -> None:
    """The stand-in's own round trip, which every comparison above leans on."""
    table = f"{DATABASE}.round_trip"
    engine_client.execute(f"CREATE DATABASE IF NOT EXISTS {DATABASE}")
    engine_client.execute(
        f"CREATE TABLE IF NOT EXISTS {table} (id FixedString(8), text String, n Int64) "
        "ENGINE = MergeTree ORDER BY n"
    )
    every_byte = bytes(range(256))
    ids = [b"'\\\x00\n\xff\x01\x02\x03", b"\x00" * 8]
    engine_client.execute(
        f"INSERT INTO {table} (id, text, n) VALUES",
        [ids, [every_byte, AWKWARD_TEXT.encode()], [-(2**63), 2**63 - 1]],
        columnar=True,
        types_check=False,
    )

    rows = engine_client.execute(
        f"SELECT id, text, n FROM {table} WHERE text != %(text)s ORDER BY n",
        {"text": "it's not \\ this"},
    )

    assert rows == [(ids[0], every_byte, -(2**63)), (ids[1], AWKWARD_TEXT.encode(), 2**63 - 1)]
    with pytest.raises(TypeError, match="for a String column"):
        engine_client.execute(f"INSERT INTO {table} (id, text, n) VALUES", [(ids[0], "text", 1)])
    with pytest.raises(ServerException) as refused:
        engine_client.execute(f"SELECT nothing FROM {table}")
    assert refused.value.code == 47  # UNKNOWN_IDENTIFIER
    engine_client.execute(f"DROP TABLE {table}")
