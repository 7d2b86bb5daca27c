"""The trace explorer's stage filters: a stage over its budget, a share of the critical path."""

import re

import pytest

from apps.pipelines.models import Pipeline
from tests.builders.ingested_traces import hex_of, ingest, make_rag_pipeline, now_ns
from tests.builders.spans import span
from tests.conftest import TeamWorld, client_for
from tests.timing import MS

URL = "/teams/acme/traces/"
SLOW, FAST, SLOWEST = 0xE1, 0xE2, 0xE3


def request(trace_id: int, t0: int, retrieval_ms: int, total_ms: int) -> list:
    return [
        span(0x1, None, t0, t0 + total_ms * MS, name="POST /chat", kind="server",
             trace_id=trace_id),
        span(0x2, 0x1, t0, t0 + retrieval_ms * MS, name="vector.search", trace_id=trace_id),
    ]  # fmt: skip


@pytest.fixture
def traffic(world: TeamWorld) -> Pipeline:
    pipeline = make_rag_pipeline(world.team)  # retrieval's budget: 200 ms
    t0 = now_ns() - 600 * 1000 * MS
    ingest(
        world.team,
        request(SLOW, t0, retrieval_ms=300, total_ms=1000),  # over budget, 30 % of the path
        request(FAST, t0 + 1000 * MS, retrieval_ms=100, total_ms=1000),  # within, 10 %
        request(SLOWEST, t0 + 2000 * MS, retrieval_ms=900, total_ms=1000),  # over, 90 %
    )
    return pipeline


def listed(html: str) -> list[str]:
    return re.findall(r'<tr data-trace="([0-9a-f]{32})">', html)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"stage": "retrieval", "stage_over_budget": "on"}, [SLOWEST, SLOW]),
        ({"stage": "retrieval", "min_critical_share": "25"}, [SLOWEST, SLOW]),
        ({"stage": "retrieval", "min_critical_share": "50"}, [SLOWEST]),
        ({"stage": "retrieval"}, [SLOWEST, FAST, SLOW]),
        ({"stage": "auth"}, []),
    ],
)
@pytest.mark.parametrize("walk_rows", [5000, 1, 0])
def test_traces_are_narrowed_by_what_their_stage_did(
    traffic: Pipeline,
    world: TeamWorld,
    query: dict[str, str],
    expected: list[int],
    walk_rows: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With few matches or (as the list takes it) many: the same answers."""
    monkeypatch.setattr("apps.ingest.selectors.traces.WALK_ROWS", walk_rows)
    html = client_for(world.viewer).get(URL, {"pipeline": "rag-chat", **query}).content.decode()
    assert listed(html) == [hex_of(t) for t in expected]


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"stage_over_budget": "on"}, "Pick the stage to filter on."),
        ({"stage": "retrieval"}, "Pick the pipeline of the stage first."),
        ({"pipeline": "rag-chat", "stage": "nope"}, "RAG chat has no stage “nope”"),
        ({"pipeline": "rag-chat", "stage": "retrieval", "min_critical_share": "0"}, "1 to 100"),
        ({"pipeline": "rag-chat", "stage": "retrieval", "min_critical_share": "x"}, "number"),
    ],
)
def test_a_stage_filter_that_cannot_apply_says_why(
    traffic: Pipeline, world: TeamWorld, query: dict[str, str], message: str
) -> None:
    response = client_for(world.owner).get(URL, query)
    assert response.status_code == 200
    html = response.content.decode()
    assert message in html
    assert listed(html) == []


def test_another_teams_stage_is_no_choice(traffic: Pipeline, world: TeamWorld) -> None:
    from tests.builders.configuration import make_pipeline, make_stage

    theirs = make_pipeline(world.other_team, "theirs")
    make_stage(theirs, "secret-stage")
    html = client_for(world.owner).get(URL).content.decode()
    assert "secret-stage" not in html
    response = client_for(world.owner).get(URL, {"pipeline": "theirs", "stage": "secret-stage"})
    assert listed(response.content.decode()) == []


@pytest.mark.parametrize(
    ("budget_ms", "expected"),
    [
        (250, [SLOWEST, SLOW]),
        (300, [SLOWEST]),  # 300 ms is not over a 300 ms budget
        (299, [SLOWEST, SLOW]),
        (50, [SLOWEST, FAST, SLOW]),
        (900, []),
    ],
)
@pytest.mark.parametrize("walk_rows", [5000, 1, 0])
def test_over_budget_is_judged_by_the_budget_as_it_is_now(
    traffic: Pipeline,
    world: TeamWorld,
    budget_ms: int,
    expected: list[int],
    walk_rows: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The traces were analyzed under a 200 ms budget; the filter reads today's."""
    monkeypatch.setattr("apps.ingest.selectors.traces.WALK_ROWS", walk_rows)
    traffic.stages.filter(slug="retrieval").update(budget_ms=budget_ms)
    query = {"pipeline": "rag-chat", "stage": "retrieval", "stage_over_budget": "on"}
    html = client_for(world.viewer).get(URL, query).content.decode()
    assert listed(html) == [hex_of(t) for t in expected]


@pytest.mark.parametrize(("share", "expected"), [(30, [SLOWEST, SLOW]), (31, [SLOWEST])])
def test_a_share_of_exactly_the_minimum_counts(
    traffic: Pipeline, world: TeamWorld, share: int, expected: list[int]
) -> None:
    query = {"pipeline": "rag-chat", "stage": "retrieval", "min_critical_share": str(share)}
    html = client_for(world.viewer).get(URL, query).content.decode()
    assert listed(html) == [hex_of(t) for t in expected]
