"""The ClickHouse span store on a real cluster (2 shards x 2 replicas): the same traffic
gives the same figures as PostgreSQL; every replica holds each acknowledged span once,
whatever is sent twice or redone; a cluster away leaves the batches for later."""

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.test import override_settings

from apps.analysis.models import StageSample
from apps.analysis.span_projection import span_projection
from apps.ingest.models import Encoding, RawBatch, Trace
from apps.ingest.services.batches import raw_batch_store, raw_batches_drain
from apps.ingest.span_store import SpanStoreUnavailable, span_store
from apps.ingest.span_store.clickhouse import ClickHouseSpanStore
from apps.ingest.span_store.clickhouse_client import clickhouse, clickhouse_config
from apps.ingest.span_store.clickhouse_writer import ClickHouseSpanWriter
from apps.ingest.span_store.postgres import PostgresSpanStore
from apps.rollups.models import RollupBucket
from apps.teams.models import Team
from tests.analysis.test_span_projection import (
    matcher_of,
    stored_trace,
)
from tests.builders.ingested_traces import make_rag_pipeline, now_ns
from tests.builders.spans import encode, rag_spans
from tests.conftest import TeamWorld, team_world
from tests.timing import MS

pytestmark = pytest.mark.django_db


def send(team: Team, spans: list[Any]) -> RawBatch:
    return raw_batch_store(
        team=team, token=None, encoding=Encoding.OTLP_PROTOBUF, body=encode(spans),
        span_count=len(spans),
    )  # fmt: skip


def replicas_count(url: str, team: Team) -> list[tuple[str, int, int]]:
    """Each replica's (host, rows, distinct spans) of the team, read on the replica itself."""
    config = clickhouse_config(url)
    with clickhouse(config) as client:
        hosts = client.execute(
            "SELECT host_address, port FROM system.clusters WHERE cluster = %(c)s",
            {"c": config.cluster},
        )
        counts = []
        for host, port in hosts:
            address = f"{host.decode() if isinstance(host, bytes) else host}:{port}"
            ((rows, unique),) = client.execute(
                f"SELECT count(), uniqExact(trace_id, span_id, start_ns) "
                f"FROM remote('{address}', {config.database}.spans_local) "
                f"WHERE team_id = {team.pk}"
            )
            counts.append((address, rows, unique))
    return counts


def figures(team: Team) -> dict[str, Any]:
    """What analysis and rollups made of a team's traces, by trace id and stage slug."""
    traces = {
        bytes(t.trace_id).hex(): (
            t.span_count, t.spans_dropped, t.start_ns, t.end_ns, t.error, t.incomplete,
            t.untracked_critical_ns, t.root_span_id and bytes(t.root_span_id),
        )
        for t in Trace.objects.filter(team=team)
    }  # fmt: skip
    stages = {s.pk: s.slug for p in team.pipelines.all() for s in p.stages.all()}
    by_pk = {t.pk: bytes(t.trace_id).hex() for t in Trace.objects.filter(team=team)}
    samples = sorted(
        (by_pk[s.trace_pk], stages[s.stage_id], s.wall_ns, s.critical_ns, s.span_count, s.error)
        for s in StageSample.objects.filter(team_id=team.pk)
    )
    buckets = sorted(
        (stages.get(b.stage_id, "-"), b.measure, b.resolution, b.bucket_start, b.count,
         b.error_count, b.sum_ns, b.max_ns)
        for b in RollupBucket.objects.filter(team_id=team.pk)
    )  # fmt: skip
    return {"traces": traces, "samples": samples, "buckets": buckets}


def run_through(team: Team, batches: list[list[Any]]) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from apps.analysis.services.finalize import traces_finalize_due
    from apps.rollups.services.bucket_pass import rollups_process_dirty

    for spans in batches:
        send(team, spans)
    while raw_batches_drain().more:
        pass
    traces_finalize_due(now=timezone.now() + timedelta(hours=1))
    while rollups_process_dirty().buckets:
        pass


def traffic(t0: int) -> list[list[Any]]:
    """RAG traces, some split over two batches (the root last), one batch sent twice."""
    batches = []
    for spans in rag_traffic_spans(t0):
        batches += [spans[1:], spans[:1]] if spans[0].trace_id % 3 == 0 else [spans]
    batches.append(batches[4])
    return batches


def rag_traffic_spans(t0: int) -> list[list[Any]]:
    return [rag_spans(0xC000 + i, t0 + i * 1000 * MS, llm_error=i % 7 == 0) for i in range(40)]


def test_the_same_traffic_gives_the_same_figures_on_both_stores(
    world: TeamWorld, clickhouse_url: str
) -> None:
    other = team_world("-ch")
    for team in (world.team, other.team):
        make_rag_pipeline(team)
    t0 = now_ns() - 3_600_000 * MS
    with override_settings(SPAN_STORE_URL=""):
        run_through(world.team, traffic(t0))
    with override_settings(SPAN_STORE_URL=clickhouse_url):
        run_through(other.team, traffic(t0))
        assert isinstance(span_store(), ClickHouseSpanStore)

    on_postgres, on_clickhouse = figures(world.team), figures(other.team)
    assert len(on_postgres["traces"]) == 40
    assert len(on_postgres["samples"]) > 100
    assert len(on_postgres["buckets"]) > 20
    assert on_clickhouse == on_postgres
    for _, rows, unique in replicas_count(clickhouse_url, other.team):
        assert rows == unique
    total = sum(unique for _, _, unique in replicas_count(clickhouse_url, other.team))
    assert total == 2 * 40 * 5  # two replicas of each shard, five spans a trace


def test_reads_give_what_postgresql_gives(world: TeamWorld, clickhouse_url: str) -> None:
    other = team_world("-ch")
    matcher = matcher_of(world)
    t0 = now_ns() - 60_000 * MS
    with override_settings(SPAN_STORE_URL=""):
        on_postgres = stored_trace(world, 0xE1, t0)
    with override_settings(SPAN_STORE_URL=clickhouse_url):
        on_clickhouse = stored_trace(other, 0xE1, t0)
        store = span_store()
    postgres = PostgresSpanStore()
    projection = span_projection(matcher.rules)

    def same(rows: list[Any]) -> list[Any]:
        return sorted(
            tuple(bytes(v) if isinstance(v, memoryview) else v for v in row[1:]) for row in rows
        )

    assert whole(store.spans_of_traces([on_clickhouse])) == whole(
        postgres.spans_of_traces([on_postgres])
    )
    read_ch = store.spans_projected([on_clickhouse], projection, 2**30)
    read_pg = postgres.spans_projected([on_postgres], projection, 2**30)
    assert same(read_ch.rows) == same(read_pg.rows)
    assert read_ch.bytes_read == read_pg.bytes_read
    # A budget that holds no trace leaves the first out, on either store.
    assert store.spans_projected([on_clickhouse], projection, 10).left_out_from == on_clickhouse.pk
    for row in read_pg.rows:
        span_id = bytes(row[1])
        start = postgres.span_start(on_postgres, span_id)
        assert store.span_start(on_clickhouse, span_id) == start
        assert start is not None
        assert store.span_content(on_clickhouse, span_id, start, chars=50, limit=20) == (
            postgres.span_content(on_postgres, span_id, start, chars=50, limit=20)
        )


def whole(rows: list[Any]) -> list[Any]:
    """Whole spans field by field, attributes and events as JSON values (PostgreSQL prints
    jsonb its own way, and both are read by decoding)."""
    return sorted(
        (bytes(r.span_id), r.parent_span_id and bytes(r.parent_span_id), r.name, r.service,
         r.kind, r.start_ns, r.end_ns, json.loads(r.attributes), json.loads(r.events), r.status)
        for r in rows
    )  # fmt: skip


def test_a_drain_redone_after_its_insert_stores_and_counts_each_span_once(
    world: TeamWorld, on_clickhouse: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    t0 = now_ns() - 60_000 * MS
    first = rag_spans(0xD1, t0)
    send(world.team, first[1:])
    raw_batches_drain()  # the trace holds four spans before
    send(world.team, first)  # the whole trace again: four copies, and the root
    send(world.team, rag_spans(0xD2, t0))

    real: Callable[..., Any] = ClickHouseSpanWriter._traces_update

    def fails_after_the_insert(*args: Any, **kwargs: Any) -> Any:
        raise SpanStoreUnavailable("PostgreSQL went away after the insert")

    monkeypatch.setattr(ClickHouseSpanWriter, "_traces_update", fails_after_the_insert)
    with pytest.raises(SpanStoreUnavailable):
        raw_batches_drain()
    assert RawBatch.objects.filter(last_error="").count() == 2  # nothing blamed, nothing lost
    monkeypatch.setattr(ClickHouseSpanWriter, "_traces_update", real)
    raw_batches_drain()

    assert not RawBatch.objects.exists()
    counts = dict(Trace.objects.filter(team=world.team).values_list("trace_id", "span_count"))
    assert sorted(counts.values()) == [5, 5]
    for _, rows, unique in replicas_count(on_clickhouse, world.team):
        assert rows == unique
    assert sum(unique for _, _, unique in replicas_count(on_clickhouse, world.team)) == 2 * 10


def test_a_cluster_away_leaves_the_batches_for_the_next_drain(world: TeamWorld) -> None:
    send(world.team, rag_spans(0xE2, now_ns()))
    away = "clickhouse://default:@127.0.0.1:9/spans_away"
    with override_settings(SPAN_STORE_URL=away), pytest.raises(SpanStoreUnavailable):
        raw_batches_drain()
    batch = RawBatch.objects.get()
    assert batch.last_error == ""
    assert batch.attempts == 0
    assert not Trace.objects.exists()  # rolled back with the drain


def test_old_days_are_dropped_whole_and_the_bytes_counted(
    world: TeamWorld, on_clickhouse: str
) -> None:
    from datetime import timedelta

    from django.utils import timezone

    store = span_store()
    today = timezone.now().date()
    old = now_ns() - 10 * 86_400_000 * MS
    run_through(world.team, [rag_spans(0xF1, old), rag_spans(0xF2, now_ns() - 60_000 * MS)])
    before = store.bytes_stored()
    assert before > 0

    dropped = store.days_drop(today - timedelta(days=7))

    assert any("spans_local" in name for name in dropped)
    old_trace, new_trace = (Trace.objects.get(trace_id=t.to_bytes(16, "big")) for t in (0xF1, 0xF2))
    assert store.spans_of_traces([old_trace]) == []
    assert len(store.spans_of_traces([new_trace])) == 5
    assert store.bytes_stored() < before
