"""Replicas killed mid-ingest on a real cluster of the test's own: nothing lost, nothing twice.

300,000 spans of three teams go through the OTLP/HTTP endpoint, one request in twenty
sent twice, while a real Celery worker drains them into a cluster of 2 shards x 2
replicas, analyses the traces and rolls them up. Mid-ingest a replica of shard 1 is
killed (SIGKILL) and started again, later one of shard 2. While a replica is away its
shard refuses the quorum inserts: the batches wait in PostgreSQL, unblamed, while the
endpoint keeps accepting, and are drained once the replica is back. At the end each
replica, read on its own, holds every acknowledged span once, and the traces, stage
samples and rollups are those the same traffic makes with spans in PostgreSQL.

The cluster is started for this module under ``var/clickhouse-faults`` on ports from
19100, so that killing its servers disturbs no other test's cluster. Like the other
cluster tests it runs under ``make test-cluster`` (``SPAN_STORE_TEST_URL``).
"""

import fcntl
import os
import shutil
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from clickhouse_driver import Client
from django.conf import settings
from django.core.management import call_command
from django.test import override_settings
from django.utils import timezone

from apps.analysis.models import DirtyBucket
from apps.analysis.services.finalize import traces_finalize_due
from apps.core.local_clickhouse.control import kill_replica, start, start_replica, stop
from apps.core.local_clickhouse.layout import Cluster
from apps.ingest.models import ANALYZED_STATES, RawBatch, Trace
from apps.ingest.services.batches import raw_batches_drain
from apps.ingest.span_store.clickhouse_client import clickhouse_config
from apps.rollups.services.bucket_pass import rollups_process_dirty
from apps.teams.models import Team
from tests.builders.configuration import make_team, make_user
from tests.builders.ingested_traces import make_rag_pipeline, now_ns
from tests.builders.spans import HandSpan, encode, span
from tests.ingest.endpoint_helpers import ingest_token, post
from tests.processes import celery_worker, wait_for
from tests.span_store.test_clickhouse_store import figures
from tests.timing import MINUTE, MS

pytestmark = [pytest.mark.slow, pytest.mark.faults, pytest.mark.worker]

BASE_PORT = 19100
TRACES = 50_000  # of six spans each
TRACES_PER_REQUEST = 167  # about 1,000 spans a request: 300 requests
TRACE_EVERY_MS = 12  # the traffic spans ten minutes: sixty 10 s buckets
TEAM_OF_REQUEST = (0, 0, 0, 1, 1, 2)  # three teams, a half, a third and a sixth of it
RESENT_EVERY = 20  # one request in twenty is sent again (5 %)...
RESENT_AFTER = 5  # ...five requests later: drained beside its copy or after it
# (requests sent before a replica is killed, its shard, the replica); AWAY_REQUESTS more
# are sent while the kill waits for a drain's insert and while the replica is away.
OUTAGES = ((60, 1, 2), (180, 2, 1))
AWAY_REQUESTS = 40


@dataclass(frozen=True)
class Request:
    """One OTLP/protobuf export request of the traffic, for one of the teams."""

    index: int
    team: int
    body: bytes
    spans: int


def trace_spans(trace_id: int, t0: int, k: int) -> list[HandSpan]:
    """A chat request whose stage times vary with ``k``: auth, then one to three vector
    searches beside two to zero tool calls (unmatched, sometimes the slowest), then an
    LLM call whose first token comes part-way; one in seventeen fails."""
    auth = 20 + k * 7 % 60
    searches = [60 + k * (13 + 5 * i) % 240 for i in range(1 + k % 3)]
    tools = [80 + k * (29 + 11 * i) % 260 for i in range(2 - k % 3)]
    llm_start = auth + max(searches + tools) + 5
    first_token = llm_start + 100 + k * 31 % 400
    llm_end = first_token + 200 + k * 53 % 900

    def at(offset_ms: int) -> int:
        return t0 + offset_ms * MS

    return [
        span(0x10, None, t0, at(llm_end + 10), name="POST /chat", kind="server",
             trace_id=trace_id),
        span(0x20, 0x10, t0, at(auth), name="auth.check", trace_id=trace_id),
        *(span(0x30 + i, 0x10, at(auth), at(auth + d), name=f"vector.search {i}",
               kind="client", trace_id=trace_id)
          for i, d in enumerate(searches)),
        *(span(0x50 + i, 0x10, at(auth), at(auth + d), name=f"tool.call {i}",
               trace_id=trace_id)
          for i, d in enumerate(tools)),
        span(0x40, 0x10, at(llm_start), at(llm_end), name="chat gpt-4o", kind="client",
             attributes={"gen_ai.operation.name": "chat"},
             events=[("first_token", at(first_token))],
             status="error" if k % 17 == 0 else "unset", trace_id=trace_id),
    ]  # fmt: skip


def traffic(t0: int) -> list[Request]:
    """The requests in the order they are sent, copies included; ``t0`` fixes every
    time, so that both runs fill the same rollup buckets."""
    requests = []
    for index, first in enumerate(range(0, TRACES, TRACES_PER_REQUEST)):
        spans = [
            s
            for k in range(first, min(first + TRACES_PER_REQUEST, TRACES))
            for s in trace_spans(0xFA17 << 64 | k, t0 + k * TRACE_EVERY_MS * MS, k)
        ]
        team = TEAM_OF_REQUEST[index % len(TEAM_OF_REQUEST)]
        requests.append(Request(index, team, encode(spans), len(spans)))
    sent = list(requests)
    for original in requests[RESENT_EVERY // 2 :: RESENT_EVERY]:
        sent.insert(sent.index(original) + RESENT_AFTER + 1, original)
    return sent


def teams(suffix: str) -> list[tuple[Team, str]]:
    """Three teams of their own owners, each with the RAG pipeline and an ingest token."""
    made = []
    for i in range(len(set(TEAM_OF_REQUEST))):
        team = make_team(f"faults-{suffix}-{i}", owner=make_user(f"owner-{suffix}-{i}"))
        make_rag_pipeline(team)
        made.append((team, ingest_token(team)))
    return made


def send(request: Request, to: list[tuple[Team, str]], acknowledged: set[int]) -> None:
    """Post one request; a 2xx means its spans are committed, and so acknowledged."""
    response = post("/v1/traces", request.body, token=to[request.team][1])
    assert response.status_code == 200, response.content[:500]
    acknowledged.add(request.index)


def replica_counts(cluster: Cluster, database: str) -> dict[tuple[int, int], dict[int, Any]]:
    """Per replica, read on that server alone once it has caught up with its queue: per
    team, (rows, distinct spans, a sum of the spans' hashes)."""
    counts = {}
    for endpoint in cluster.endpoints():
        client = Client(host=endpoint.host, port=endpoint.port, send_receive_timeout=300)
        try:
            client.execute(f"SYSTEM SYNC REPLICA {database}.spans_local")
            rows = client.execute(
                "SELECT team_id, count(), uniqExact(trace_id, span_id, start_ns), "
                f"sum(cityHash64(trace_id, span_id, start_ns)) FROM {database}.spans_local "
                "GROUP BY team_id"
            )
        finally:
            client.disconnect()
        counts[(endpoint.shard, endpoint.replica)] = {team: rest for team, *rest in rows}
    return counts


@dataclass
class Outage:
    """One replica killed and started again, and what the test saw meanwhile."""

    shard: int
    replica: int
    killed: bool = False
    mid_insert: bool = False  # killed while the entry server ran a span insert
    log_mark: int = 0  # the worker's log up to the kill
    waiting: int = 0  # batches in PostgreSQL once a drain had been refused
    blamed: int = 0  # of those, set aside with an error
    refused: int = 0  # drains refused from the kill until the next one (or the end)

    def begin(self, cluster: Cluster, database: str, log: "WorkerLog") -> None:
        """SIGKILL the replica as soon as a drain's span insert runs on the entry server,
        or after a minute without one: a crash in the middle of a write."""
        entry = cluster.endpoints()[0]
        client = Client(host=entry.host, port=entry.port)
        deadline = time.monotonic() + 60
        try:
            while not self.mid_insert and time.monotonic() < deadline:
                ((running,),) = client.execute(
                    "SELECT count() FROM system.processes WHERE query LIKE %(insert)s",
                    {"insert": f"INSERT INTO {database}.spans (%"},
                )
                self.mid_insert = running > 0
                if not self.mid_insert:
                    time.sleep(0.005)
        finally:
            client.disconnect()
        self.log_mark = log.mark()
        self.killed = kill_replica(self.shard, self.replica, cluster=cluster)


class WorkerLog:
    """The worker's log, read from a mark: its drains the store refused."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def mark(self) -> int:
        return self.path.stat().st_size if self.path.exists() else 0

    def refused_since(self, start: int, least: int) -> bool:
        return self.refusals(start) >= least

    def refusals(self, start: int, end: int | None = None) -> int:
        with self.path.open("rb") as log:
            log.seek(start)
            text = log.read(None if end is None else end - start).decode(errors="replace")
        return sum(
            1
            for line in text.splitlines()
            if "drain_raw_batches" in line and "SpanStoreUnavailable" in line
        )


@pytest.fixture(scope="module")
def faults_cluster(django_db_blocker: Any) -> Iterator[Cluster]:
    """A cluster of the module's own, its schema made anew; stopped whatever happens."""
    if not os.environ.get("SPAN_STORE_TEST_URL"):
        pytest.skip("no ClickHouse cluster: `make test-cluster` starts one")
    home = Path(settings.VAR_DIR).resolve() / "clickhouse-faults"
    cluster = Cluster(home=home, base_port=BASE_PORT)
    home.parent.mkdir(parents=True, exist_ok=True)
    # Two runs of this module from one checkout would share its files and ports, and stop
    # each other's servers: the second waits for the first.
    with home.with_suffix(".lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        # A run stopped short may have left it running, or its files: start afresh.
        stop(cluster)
        shutil.rmtree(home, ignore_errors=True)
        try:
            start(cluster)
            with override_settings(SPAN_STORE_URL=cluster.url()), django_db_blocker.unblock():
                call_command("span_store_migrate", verbosity=0)
            yield cluster
        finally:
            stop(cluster)


def reference_run(sent: list[Request]) -> list[tuple[Team, str]]:
    """The same traffic with spans in PostgreSQL, into teams of its own: drained,
    analysed and rolled up in this process by the services the worker's tasks call."""
    reference = teams("pg")
    with override_settings(SPAN_STORE_URL=""):
        for number, request in enumerate(sent, start=1):
            send(request, reference, set())
            if number % 20 == 0:
                while raw_batches_drain().more:
                    pass
        while raw_batches_drain().more:
            pass
        while traces_finalize_due(now=timezone.now() + timedelta(hours=1)).traces:
            pass
        while rollups_process_dirty().buckets:
            pass
    return reference


@dataclass
class Sender:
    """Sends the traffic in order to the teams whose spans go to the cluster."""

    sent: list[Request]
    to: list[tuple[Team, str]]
    position: int = 0
    acknowledged: set[int] = field(default_factory=set)

    def until(self, position: int) -> None:
        for request in self.sent[self.position : position]:
            send(request, self.to, self.acknowledged)
        self.position = max(self.position, position)

    def one(self) -> None:
        self.until(self.position + 1)


def outage_run(outage: Outage, cluster: Cluster, sender: Sender, log: WorkerLog) -> None:
    """Kill the replica in the middle of a drain's insert while requests keep coming,
    see drains refused and their batches wait, then start it again."""
    database = clickhouse_config(cluster.url()).database
    last = sender.position + AWAY_REQUESTS
    killer = threading.Thread(target=outage.begin, args=(cluster, database, log))
    killer.start()
    while killer.is_alive() and sender.position < last:
        sender.one()
    killer.join()
    assert outage.killed, outage
    # The endpoint keeps accepting while the shard refuses every drain.
    sender.until(last)
    # The drain the kill caught, and one begun while the replica is away.
    refused = partial(log.refused_since, outage.log_mark, 2)
    assert wait_for(refused, timeout=120, interval=0.5), f"drains not refused: {outage}"
    outage.waiting = RawBatch.objects.count()
    outage.blamed = RawBatch.objects.exclude(last_error="").count()
    start_replica(outage.shard, outage.replica, cluster=cluster)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("clean_cache")
@override_settings(INGEST_RATE_LIMIT_SPANS=0)  # sent as fast as it goes: rate is not tested here
def test_replicas_killed_mid_ingest_lose_nothing_and_store_nothing_twice(
    faults_cluster: Cluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster, url = faults_cluster, faults_cluster.url()
    # Ten minutes of traffic from 40 to 50 minutes ago, on a whole ten minutes: closed
    # buckets well within the 10 s buckets' two hours, the same for both runs.
    t0 = (now_ns() - 40 * MINUTE) // (10 * MINUTE) * (10 * MINUTE)
    sent = traffic(t0)
    reference = reference_run(sent)

    stored = teams("ch")
    ch_teams = [team for team, _ in stored]
    sender = Sender(sent, stored)
    log = WorkerLog(tmp_path / "worker.log")
    outages = [Outage(shard, replica) for _, shard, replica in OUTAGES]

    def settled() -> bool:
        analysed = Trace.objects.filter(team__in=ch_teams, state__in=ANALYZED_STATES)
        return (
            not RawBatch.objects.exists()
            and analysed.count() == TRACES
            and not DirtyBucket.objects.exists()
        )

    def blamed() -> bool:
        return RawBatch.objects.exclude(last_error="").exists()

    with (
        override_settings(SPAN_STORE_URL=url),
        celery_worker(log.path, beat=True, env={"SPAN_STORE_URL": url}),
    ):
        for (after, _, _), outage in zip(OUTAGES, outages, strict=True):
            sender.until(after)
            # The drains are storing spans before anything fails.
            assert wait_for(lambda: Trace.objects.filter(team__in=ch_teams).exists(), timeout=60)
            outage_run(outage, cluster, sender, log)
        sender.until(len(sent))
        # A batch set aside would never be drained: no use waiting the whole while then.
        done = wait_for(lambda: settled() or blamed(), timeout=300, interval=1)
        worker_log = log.path.read_text()
    assert done, f"the worker did not catch up; its log ends:\n{worker_log[-4000:]}"
    assert not blamed(), RawBatch.objects.exclude(last_error="").values("id", "last_error")[:5]

    ends = [outage.log_mark for outage in outages[1:]] + [None]
    for outage, end in zip(outages, ends, strict=True):
        outage.refused = log.refusals(outage.log_mark, end)
        assert outage.refused >= 2, outage
        assert outage.waiting > 0, outage  # the refused batches stayed in PostgreSQL...
        assert outage.blamed == 0, outage  # ...none of them set aside as if at fault

    # Every replica, read on its own, holds each acknowledged span once; both replicas of
    # a shard hold the same spans, and the shards together hold all of them.
    spans_of = {r.index: r.spans for r in sent}
    expected = Counter[int]()
    for index in sender.acknowledged:
        expected[stored[TEAM_OF_REQUEST[index % len(TEAM_OF_REQUEST)]][0].pk] += spans_of[index]
    assert sum(expected.values()) == TRACES * 6
    counts = replica_counts(cluster, clickhouse_config(url).database)
    for (team, _), (pg_team, _) in zip(stored, reference, strict=True):
        held = {where: by_team.get(team.pk, (0, 0, 0)) for where, by_team in counts.items()}
        for where, (rows, unique, _) in held.items():
            assert rows == unique, (team.slug, where)
        for shard in (1, 2):
            assert held[(shard, 1)] == held[(shard, 2)], (team.slug, shard)
        assert held[(1, 1)][1] + held[(2, 1)][1] == expected[team.pk]
        span_counts = Trace.objects.filter(team=team).values_list("span_count", flat=True)
        assert sum(span_counts) == expected[team.pk]
        # What analysis and rollups made of it is what they made of PostgreSQL's spans.
        assert figures(team) == figures(pg_team), team.slug

    with capsys.disabled():
        print(
            f"\nacknowledged {sum(expected.values())} spans in {len(sender.acknowledged)} "
            f"requests, {len(sent) - len(sender.acknowledged)} of them sent twice; per team "
            f"{sorted(expected.values())}; "
            + "; ".join(
                f"s{o.shard}r{o.replica} killed mid-insert {o.mid_insert}: {o.refused} drains "
                f"refused, {o.waiting} batches waiting"
                for o in outages
            )
            + "; rows per replica "
            + ", ".join(
                f"s{shard}r{replica} {sum(v[0] for v in by_team.values())}"
                for (shard, replica), by_team in counts.items()
            )
        )
