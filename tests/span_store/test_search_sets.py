"""The traces' search sets in a span store that keeps them: analysis writes each trace's
set there, the store names the candidates the trace list asks for (in its order, past
its walk, a read at a time), and the list checks them on their rows; PostgreSQL then
keeps no search index. On the engine in process (a current ClickHouse) and, under
``make test-cluster``, on the cluster of Debian's 18.16."""

import io
import random
import re
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import override_settings
from django.urls import reverse

from apps.analysis.trace_search import pair_hash
from apps.ingest.models import Trace
from apps.ingest.services.search_index import INDEX, search_sets_copy
from apps.ingest.span_store import SearchOrder, SearchSet, SpanStore, span_store
from tests.builders.ingested_traces import ingest, make_rag_pipeline, now_ns
from tests.builders.spans import rag_spans, retrieval_request
from tests.conftest import TeamWorld, client_for, team_world
from tests.span_store.test_sql_on_current_engine import (  # noqa: F401 - fixtures
    engine_client,
    on_chdb,
)
from tests.timing import MS

pytestmark = pytest.mark.django_db

A, B, C = 101, 202, 303  # elements of the hand-made sets


@pytest.fixture(params=["engine", "cluster"])
def store(request: pytest.FixtureRequest) -> Iterator[SpanStore]:
    """The ClickHouse store on the engine in process, or on the cluster."""
    if request.param == "engine":
        request.getfixturevalue("on_chdb")
        yield span_store()
        return
    url = request.getfixturevalue("clickhouse_url")
    with override_settings(SPAN_STORE_URL=url):
        # As on a deployment, whatever the run's store: the index goes in this test.
        call_command("span_store_migrate", verbosity=0)
        yield span_store()


def hand_sets(team_id: int) -> list[SearchSet]:
    """Forty traces: A on the even ones, B on every third, C on all; starts 1,000 ns
    apart, durations scattered with ties."""
    sets = []
    for pk in range(1, 41):
        hashes = [C] + [A] * (pk % 2 == 0) + [B] * (pk % 3 == 0)
        sets.append(SearchSet(team_id, pk, 1000 * pk, (pk * 37) % 25, hashes))
    return sets


def expected(
    sets: list[SearchSet],
    groups: list[tuple[int, ...]],
    order: SearchOrder,
    after: tuple[int, int] | None = None,
) -> list[tuple[int, int]]:
    """The candidates, computed here from the sets themselves."""
    rows = set()
    for s in sets:
        if not all(set(group) & set(s.hashes) for group in groups):
            continue
        key = s.start_ns if order.by_start else s.duration_ns
        place = (key, s.trace_pk)
        past = key < order.boundary if order.descending else key > order.boundary
        if order.start_from is not None and s.start_ns < order.start_from:
            continue
        if order.start_until is not None and s.start_ns >= order.start_until:
            continue
        if after is not None and not (place < after if order.descending else place > after):
            continue
        if past:
            rows.add(place)
    return sorted(rows, reverse=order.descending)


ORDERS = [
    SearchOrder(by_start=True, descending=True, boundary=35_500),
    SearchOrder(by_start=True, descending=False, boundary=3_000),
    SearchOrder(by_start=False, descending=True, boundary=24),
    SearchOrder(by_start=False, descending=False, boundary=-1),
    SearchOrder(by_start=True, descending=True, boundary=10**12, start_from=8_000,
                start_until=30_000),
]  # fmt: skip
GROUPS = [[(A,)], [(A,), (B,)], [(A, B)], [(A, B), (C,)], [(404,)]]


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("groups", GROUPS)
def test_candidates_hold_an_element_of_each_group_in_the_order_a_read_at_a_time(
    store: SpanStore, order: SearchOrder, groups: list[tuple[int, ...]]
) -> None:
    team_id = random.randrange(10**9, 10**12)  # the store's tables outlive a test
    sets = hand_sets(team_id)
    store.search_sets_write(sets)
    store.search_sets_write(sets[:7])  # a pass redone: its sets kept twice

    whole = store.search_candidates(
        team_id=team_id, groups=groups, order=order, after=None, limit=1000
    )
    assert whole == expected(sets, groups, order)
    # Read three at a time, each after the last one named: the same candidates.
    pieces: list[tuple[int, int]] = []
    while True:
        after = pieces[-1] if pieces else None
        read = store.search_candidates(
            team_id=team_id, groups=groups, order=order, after=after, limit=3
        )
        assert read == expected(sets, groups, order, after)[:3]
        pieces += read
        if len(read) < 3:
            break
    assert pieces == whole
    # Another team's sets name none of its traces.
    assert store.search_candidates(
        team_id=team_id + 1, groups=groups, order=order, after=None, limit=1000
    ) == []  # fmt: skip


def test_each_revision_of_a_set_is_a_candidate_of_its_own(store: SpanStore) -> None:
    team_id = random.randrange(10**9, 10**12)
    store.search_sets_write([SearchSet(team_id, 7, 5_000, 40, [A, C])])
    # Analysed again: later root, and no A any more.
    store.search_sets_write([SearchSet(team_id, 7, 9_000, 30, [B, C])])
    newest = SearchOrder(by_start=True, descending=True, boundary=10**9)

    def named(groups: list[tuple[int, ...]]) -> list[tuple[int, int]]:
        return store.search_candidates(
            team_id=team_id, groups=groups, order=newest, after=None, limit=10
        )

    assert named([(C,)]) == [(9_000, 7), (5_000, 7)]
    # An element of one revision never completes the other's set.
    assert named([(A,), (B,)]) == []
    assert named([(B,)]) == [(9_000, 7)]


def test_elements_are_compared_on_their_low_bits_and_named_as_a_superset(
    store: SpanStore,
) -> None:
    """The store keeps 32 bits of each element: a set whose element differs from the
    filter's only above them is named too (the trace list checks every candidate on its
    row); negative hashes and the widest ones compare like the others."""
    team_id = random.randrange(10**9, 10**12)
    element = -(2**63) + 12_345
    twin = element + 2**40  # the same low 32 bits
    widest = 2**63 - 1
    store.search_sets_write([
        SearchSet(team_id, 1, 1_000, 5, [element, C]),
        SearchSet(team_id, 2, 2_000, 5, [twin, C]),
        SearchSet(team_id, 3, 3_000, 5, [widest]),
    ])  # fmt: skip
    newest = SearchOrder(by_start=True, descending=True, boundary=10**9)

    def named(groups: list[tuple[int, ...]]) -> list[tuple[int, int]]:
        return store.search_candidates(
            team_id=team_id, groups=groups, order=newest, after=None, limit=10
        )

    assert named([(element,)]) == [(2_000, 2), (1_000, 1)]
    assert named([(widest,)]) == [(3_000, 3)]
    assert named([(widest, element), (C,)]) == [(2_000, 2), (1_000, 1)]
    assert named([(element + 1,)]) == []


def trace_ids(html: str) -> list[str]:
    return re.findall(r'<tr data-trace="([0-9a-f]{32})">', html)


def listing(world: TeamWorld, query: dict[str, str]) -> list[str]:
    """Every trace the list shows for ``query``, following its pages."""
    client = client_for(world.viewer)
    url = reverse("traces:list", kwargs={"team_slug": world.team.slug})
    html = client.get(url, query).content.decode()
    shown = trace_ids(html)
    while match := re.search(r'rel="next" href="([^"]+)"', html):
        html = client.get(match.group(1).replace("&amp;", "&")).content.decode()
        shown += trace_ids(html)
    return shown


def traffic(team_world: TeamWorld, t0: int) -> None:
    """RAG traces of several speeds, one in three over its retrieval budget, and
    requests of another service."""
    make_rag_pipeline(team_world.team)
    traces = []
    for i in range(18):
        spans = rag_spans(0xA000 + i, t0 + i * 1000 * MS, llm_error=i % 5 == 0)
        if i % 3 == 0:  # a slow retrieval: 50-700 ms
            spans[2] = replace(spans[2], end_ns=spans[2].start_ns + 650 * MS)
        traces.append(spans)
    traces += [retrieval_request(0xB000 + i, t0 + i * 700 * MS) for i in range(6)]
    ingest(team_world.team, *traces)


QUERIES = [
    {"attr": "service.name=chat-api"},
    {"attr": "gen_ai.operation.name=chat", "sort": "slowest"},
    {"pipeline": "rag-chat", "stage": "retrieval", "stage_over_budget": "on"},
    {"pipeline": "rag-chat", "stage": "retrieval", "min_critical_share": "25",
     "sort": "fastest"},
    {"attr": "service.name=chat-api", "status": "error", "sort": "oldest"},
]  # fmt: skip


@pytest.mark.parametrize("query", QUERIES)
def test_the_trace_list_lists_through_the_store_what_it_lists_on_postgresql(
    world: TeamWorld, store: SpanStore, query: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # No walk: every match comes from the store's candidates, two a read, pages of two.
    monkeypatch.setattr("apps.ingest.selectors.traces.WALK_ROWS", 0)
    monkeypatch.setattr("apps.ingest.selectors.traces.CANDIDATES_PER_READ", 2)
    monkeypatch.setattr("apps.dashboards.views.traces.PAGE_SIZE", 2)
    other = team_world("-store")
    t0 = now_ns() - 600_000 * MS
    with override_settings(SPAN_STORE_URL=""):
        traffic(world, t0)
        on_postgresql = listing(world, query)
    traffic(other, t0)
    through_store = listing(other, query)

    assert len(on_postgresql) >= 3
    assert through_store == on_postgresql
    assert len(set(through_store)) == len(through_store)


def test_a_trace_analysed_again_is_listed_once_in_its_new_place(
    world: TeamWorld, store: SpanStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("apps.ingest.selectors.traces.WALK_ROWS", 0)
    monkeypatch.setattr("apps.ingest.selectors.traces.CANDIDATES_PER_READ", 2)
    t0 = now_ns() - 600_000 * MS
    traffic(world, t0)
    query = {"attr": "service.name=chat-api"}
    before = listing(world, query)
    # The oldest trace comes back later, as a root arriving late would make it, and is
    # kept at its new start beside the old one.
    moved = Trace.objects.get(team=world.team, trace_id=bytes.fromhex(before[-1]))
    assert moved.start_ns is not None
    assert moved.end_ns is not None
    assert moved.search_hashes
    moved.start_ns += 60_000 * MS
    moved.end_ns += 60_000 * MS
    moved.save(update_fields=["start_ns", "end_ns"])
    store.search_sets_write(
        [SearchSet(world.team.pk, moved.pk, moved.start_ns, moved.duration_ns or 0,
                   moved.search_hashes)]
    )  # fmt: skip

    assert listing(world, query) == [before[-1], *before[:-1]]


def test_analysis_keeps_each_set_in_the_store_and_postgresql_keeps_no_index(
    world: TeamWorld, store: SpanStore
) -> None:
    traffic(world, now_ns() - 600_000 * MS)
    traces = Trace.objects.filter(team=world.team)
    assert traces.count() == 24
    chat = pair_hash(world.team.pk, "gen_ai.operation.name", "chat")
    newest = SearchOrder(by_start=True, descending=True, boundary=2**62)
    named = store.search_candidates(
        team_id=world.team.pk, groups=[(chat,)], order=newest, after=None, limit=100
    )
    assert named == sorted(
        ((t.start_ns, t.pk) for t in traces if chat in (t.search_hashes or [])), reverse=True
    )
    assert len(named) == 18
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s)", [INDEX])
        assert cursor.fetchone() == (None,)


def test_sets_of_traces_analysed_before_are_copied_into_the_store(
    world: TeamWorld, store: SpanStore
) -> None:
    with override_settings(SPAN_STORE_URL=""):
        traffic(world, now_ns() - 600_000 * MS)
    chat = pair_hash(world.team.pk, "gen_ai.operation.name", "chat")
    newest = SearchOrder(by_start=True, descending=True, boundary=2**62)

    def named() -> list[tuple[int, int]]:
        return store.search_candidates(
            team_id=world.team.pk, groups=[(chat,)], order=newest, after=None, limit=100
        )

    assert named() == []
    copied: list[int] = []
    assert search_sets_copy(store, copied.append) >= 24
    assert len(named()) == 18


def test_on_postgresql_the_command_builds_the_search_index_when_it_is_missing() -> None:
    def command() -> str:
        out = io.StringIO()
        with override_settings(SPAN_STORE_URL=""):
            call_command("span_store_migrate", stdout=out)
        return out.getvalue()

    def index() -> Any:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_get_indexdef(to_regclass(%s))", [INDEX])
            return cursor.fetchone()[0]

    with connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX IF EXISTS {INDEX}")
    assert index() is None
    assert "Built the trace_search_hashes index." in command()
    assert "USING gin (search_hashes) WHERE (start_ns IS NOT NULL)" in index()
    assert "The trace_search_hashes index is in place." in command()
