"""The traces API takes the list page's parameters: orders, ranges, attributes, stages."""

from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from apps.ingest.selectors import TraceCursor
from tests.builders.api import error_of, token_client
from tests.conftest import TeamWorld
from tests.dashboards.trace_catalog import Catalog, build_catalog

LIST = "/api/v1/traces/"
MODEL = "gen_ai.request.model"


@pytest.fixture
def catalog(world: TeamWorld) -> Catalog:
    return build_catalog(world)


def listed(response: Any) -> list[str]:
    assert response.status_code == 200, response.content
    return [t["trace_id"] for t in response.json()["results"]]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"sort": "oldest"}, ["listy", "cached", "failed", "fresh", "health"]),
        ({"attr": "user.id=42"}, ["health", "fresh", "failed"]),
        ({"attr": ["user.id=42", f"{MODEL}=gpt-4o-mini"]}, ["fresh"]),
        ({"window": "24h", "sort": "slowest"}, ["failed", "fresh", "health"]),
        ({"min_duration_ms": 2501}, ["failed"]),
        ({"max_duration_ms": 800, "sort": "slowest"}, ["cached", "health"]),
        ({"pipeline": "rag-chat", "stage": "retrieval", "stage_over_budget": "true"}, ["fresh"]),
        ({"pipeline": "rag-chat", "stage": "retrieval", "stage_over_budget": "false"},
         ["fresh", "failed"]),
    ],
)  # fmt: skip
def test_filters_and_orders(catalog: Catalog, query: dict[str, Any], expected: list[str]) -> None:
    assert listed(token_client(catalog.world.viewer).get(LIST, query)) == catalog.named(*expected)


def test_a_custom_range_in_rfc_3339(catalog: Catalog) -> None:
    from apps.core.time import ns_to_datetime

    start = ns_to_datetime(catalog.failed.start_ns or 0)
    end = ns_to_datetime(catalog.fresh.start_ns or 0)
    query = {"from": start.isoformat(), "to": end.isoformat()}
    assert listed(token_client(catalog.world.viewer).get(LIST, query)) == catalog.named("failed")


def test_next_links_keep_every_parameter(catalog: Catalog) -> None:
    client = token_client(catalog.world.owner)
    url: str | None = (
        f"http://testserver{LIST}?sort=fastest&page_size=2&attr=service.name%3Dchat-api"
        f"&attr={MODEL}%3Dgpt-4o-mini"
    )
    seen: list[str] = []
    while url:
        body = client.get(url).json()
        seen += [t["trace_id"] for t in body["results"]]
        url = body["next"]
        if url:
            params = parse_qs(urlsplit(url).query)
            assert params["attr"] == ["service.name=chat-api", f"{MODEL}=gpt-4o-mini"]
            assert params["sort"] == ["fastest"]
    assert seen == listed(client.get(LIST, {"sort": "fastest", "attr": [f"{MODEL}=gpt-4o-mini"]}))
    assert len(seen) == 3


@pytest.mark.parametrize(
    ("query", "fields"),
    [
        ({"sort": "random"}, {"sort"}),
        ({"attr": "no-equals"}, {"attr"}),
        ({"attr": [f"k{i}=v" for i in range(6)]}, {"attr"}),
        ({"attr": "k=" + "v" * 300}, {"attr"}),
        ({"window": "2d"}, {"window"}),
        ({"window": "1h", "from": "2026-01-01T00:00:00Z"}, {"window"}),
        ({"from": "not a time"}, {"from"}),
        ({"from": "2026-01-02T00:00:00Z", "to": "2026-01-01T00:00:00Z"}, {"to"}),
        ({"min_duration_ms": 10, "max_duration_ms": 5}, {"max_duration_ms"}),
        ({"stage": "retrieval"}, {"stage"}),
        ({"pipeline": "rag-chat", "stage": "nope"}, {"stage"}),
        ({"pipeline": "rag-chat", "stage": "retrieval", "stage_over_budget": "perhaps"},
         {"stage_over_budget"}),
        ({"cursor": TraceCursor(1, 1, "oldest").encode()}, {"cursor"}),
        ({"page_size": 0, "attr": "x", "sort": "up"}, {"page_size", "attr", "sort"}),
    ],
)  # fmt: skip
def test_malformed_parameters_are_a_400_naming_each_field(
    catalog: Catalog, query: dict[str, Any], fields: set[str]
) -> None:
    response = token_client(catalog.world.owner).get(LIST, query)
    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == "invalid"
    assert set(error["fields"]) == fields


def test_an_outsider_naming_the_team_gets_404_and_finds_only_their_own(catalog: Catalog) -> None:
    client = token_client(catalog.world.outsider)
    query = {"attr": ["user.id=42", f"{MODEL}=gpt-4o-mini"]}
    assert client.get(LIST, {"team": "acme", **query}).status_code == 404
    assert listed(client.get(LIST, query)) == [bytes(catalog.theirs.trace_id).hex()]
