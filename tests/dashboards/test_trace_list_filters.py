"""The trace list's orders, duration and time ranges, attribute filters and shareable URLs,
on traces whose answers are known (``trace_catalog``)."""

import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.urls import reverse

from apps.core.time import ns_to_datetime
from apps.ingest.selectors import TraceCursor
from tests.conftest import TeamWorld, client_for
from tests.dashboards.trace_catalog import LONG_PROMPT, Catalog, build_catalog

URL = reverse("traces:list", kwargs={"team_slug": "acme"})
MODEL = "gen_ai.request.model"


@pytest.fixture
def catalog(world: TeamWorld) -> Catalog:
    return build_catalog(world)


@pytest.fixture(params=[5000, 2, 0], ids=["walked", "walked then collected", "collected"])
def plan(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    """Search-set filters walk the order's index for a while, then collect the rest of
    their matches through the GIN index (see ``_narrowed_rows``): every split of the
    work gives the same answers."""
    monkeypatch.setattr("apps.ingest.selectors.traces.WALK_ROWS", request.param)
    return int(request.param)


def listed(response: Any) -> list[str]:
    return re.findall(r'<tr data-trace="([0-9a-f]{32})">', response.content.decode())


def by_id(catalog: Catalog, *names: str, descending: bool) -> list[str]:
    """Traces of equal key, in the order the list breaks the tie: by row id."""
    traces = sorted((getattr(catalog, n) for n in names), key=lambda t: t.pk, reverse=descending)
    return [bytes(t.trace_id).hex() for t in traces]


def test_the_four_orders(catalog: Catalog) -> None:
    client = client_for(catalog.world.viewer)
    newest = catalog.named("health", "fresh", "failed", "cached", "listy")
    assert listed(client.get(URL)) == newest
    assert listed(client.get(URL, {"sort": "newest"})) == newest
    assert listed(client.get(URL, {"sort": "oldest"})) == newest[::-1]
    # fresh and listy both last 2,500 ms: the higher id first when slowest, last when fastest.
    assert listed(client.get(URL, {"sort": "slowest"})) == [
        *catalog.named("failed"), *by_id(catalog, "fresh", "listy", descending=True),
        *catalog.named("cached", "health"),
    ]  # fmt: skip
    assert listed(client.get(URL, {"sort": "fastest"})) == [
        *catalog.named("health", "cached"), *by_id(catalog, "fresh", "listy", descending=False),
        *catalog.named("failed"),
    ]  # fmt: skip


@pytest.mark.parametrize("sort", ["newest", "oldest", "slowest", "fastest"])
def test_keyset_pages_of_every_order_list_each_trace_once_in_that_order(
    catalog: Catalog, sort: str, monkeypatch: pytest.MonkeyPatch, plan: int
) -> None:
    client = client_for(catalog.world.owner)
    whole = listed(client.get(URL, {"sort": sort}))
    monkeypatch.setattr("apps.dashboards.views.traces.PAGE_SIZE", 2)
    seen: list[str] = []
    url = f"{URL}?sort={sort}&attr=service.name%3Dchat-api&attr=&window="
    pages = 0
    while url:
        response = client.get(url)
        rows = listed(response)
        assert 0 < len(rows) <= 2
        seen += rows
        pages += 1
        match = re.search(r'rel="next" href="([^"]+)"', response.content.decode())
        url = match.group(1).replace("&amp;", "&") if match else ""
        if url:
            params = parse_qs(urlsplit(url).query)
            # The order and every filter travel with the cursor; empty ones are dropped.
            assert params["sort"] == [sort]
            assert params["attr"] == ["service.name=chat-api"]
            assert "window" not in params
    assert pages == 2
    assert seen == [row for row in whole if row != catalog.named("health")[0]]


def test_a_page_link_of_another_order_is_refused(catalog: Catalog) -> None:
    cursor = TraceCursor(catalog.fresh.start_ns or 0, catalog.fresh.pk, "newest").encode()
    response = client_for(catalog.world.owner).get(URL, {"sort": "slowest", "cursor": cursor})
    assert "This page link is of another order" in response.content.decode()
    assert listed(response) == []


def test_a_cursor_of_the_old_form_still_pages_newest_first(catalog: Catalog) -> None:
    """Links made before there were orders carry ``start.id`` alone."""
    import base64

    raw = f"{catalog.failed.start_ns}.{catalog.failed.pk}".encode()
    cursor = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    response = client_for(catalog.world.owner).get(URL, {"cursor": cursor})
    assert listed(response) == catalog.named("cached", "listy")


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        # Bounds are inclusive, and durations past 2.1 s (past a 32-bit count of ns) work.
        ({"min_duration_ms": "2500"}, ["fresh", "failed", "listy"]),
        ({"min_duration_ms": "2501"}, ["failed"]),
        ({"max_duration_ms": "2500"}, ["health", "fresh", "cached", "listy"]),
        ({"min_duration_ms": "800", "max_duration_ms": "800"}, ["cached"]),
        ({"min_duration_ms": "801", "max_duration_ms": "2499"}, []),
        ({"min_duration_ms": "6", "max_duration_ms": "2999", "sort": "fastest"},
         ["cached", "fresh", "listy"]),
    ],
)  # fmt: skip
def test_duration_range(catalog: Catalog, query: dict[str, str], expected: list[str]) -> None:
    response = client_for(catalog.world.viewer).get(URL, query)
    rows = listed(response)
    if query.get("sort") == "fastest":
        assert rows == [*catalog.named("cached"), *by_id(catalog, "fresh", "listy",
                                                          descending=False)]  # fmt: skip
    else:
        assert rows == catalog.named(*expected)


def _utc(moment: datetime, offset_hours: int | None = None) -> str:
    """As the page's inputs write a time (UTC, no zone), or in RFC 3339 with an offset."""
    if offset_hours is None:
        return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return moment.astimezone(timezone(timedelta(hours=offset_hours))).isoformat("T", "seconds")


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"window": "15m"}, ["health", "fresh"]),
        ({"window": "24h"}, ["health", "fresh", "failed"]),
        ({"window": "7d"}, ["health", "fresh", "failed", "cached", "listy"]),
        ({"window": "24h", "sort": "slowest"}, ["failed", "fresh", "health"]),
    ],
)
def test_named_time_ranges(catalog: Catalog, query: dict[str, str], expected: list[str]) -> None:
    assert listed(client_for(catalog.world.viewer).get(URL, query)) == catalog.named(*expected)


def test_a_custom_range_in_utc_or_rfc_3339(catalog: Catalog) -> None:
    client = client_for(catalog.world.viewer)
    now = datetime.now(UTC)
    three_hours, one_hour = now - timedelta(hours=3), now - timedelta(hours=1)
    assert listed(
        client.get(URL, {"from": _utc(three_hours), "to": _utc(one_hour)})
    ) == catalog.named("failed")
    # The same range written with an offset, and the window named explicitly.
    assert listed(
        client.get(
            URL, {"window": "custom", "from": _utc(three_hours, 2), "to": _utc(one_hour, -5)}
        )
    ) == catalog.named("failed")
    # Without an end it runs to now.
    assert listed(client.get(URL, {"from": _utc(now - timedelta(hours=27))})) == catalog.named(
        "health", "fresh", "failed", "cached"
    )
    # The start is inclusive, the end exclusive.
    start = ns_to_datetime(catalog.failed.start_ns or 0)
    exact = start.isoformat()
    assert listed(client.get(URL, {"from": exact})) == catalog.named("health", "fresh", "failed")
    assert catalog.named("failed")[0] not in listed(
        client.get(URL, {"from": _utc(start - timedelta(hours=1)), "to": exact})
    )


@pytest.mark.parametrize(
    ("attrs", "expected"),
    [
        # 42 on the root as a number, 42.0 and "42" are one value; a list never matches.
        (["user.id=42"], ["health", "fresh", "failed"]),
        ([" user.id = 42 "], ["health", "fresh", "failed"]),
        ([f"{MODEL}=gpt-4o-mini"], ["fresh", "cached", "listy"]),
        ([f"{MODEL}=gpt-4o"], ["failed"]),
        ([f"{MODEL.upper()}=gpt-4o-mini"], []),
        # On different spans of one trace: the root's user, a child's model.
        (["user.id=42", f"{MODEL}=gpt-4o-mini"], ["fresh"]),
        (["cache.hit=true"], ["cached"]),
        (["cache.hit=True"], []),
        (["service.name=edge"], ["health"]),
        (["user.id=43"], []),
        (["gen_ai.operation.name=chat", "user.id=7"], ["cached"]),
    ],
)
def test_attribute_filters(
    catalog: Catalog, attrs: list[str], expected: list[str], plan: int
) -> None:
    response = client_for(catalog.world.viewer).get(URL, {"attr": attrs})
    assert response.status_code == 200
    assert listed(response) == catalog.named(*expected)
    for attr in attrs:  # the page keeps what was asked, in its inputs
        assert f'name="attr" value="{attr}"' in response.content.decode()


def test_a_value_too_long_to_be_kept_is_refused_rather_than_matching_nothing(
    catalog: Catalog,
) -> None:
    response = client_for(catalog.world.viewer).get(URL, {"attr": f"prompt={LONG_PROMPT}"})
    assert "values longer than 256 characters are not kept" in response.content.decode()
    assert listed(response) == []


def test_another_teams_traces_with_the_same_attributes_stay_out(catalog: Catalog) -> None:
    query = {"attr": ["user.id=42", f"{MODEL}=gpt-4o-mini"]}
    assert listed(client_for(catalog.world.owner).get(URL, query)) == catalog.named("fresh")
    theirs = reverse("traces:list", kwargs={"team_slug": "globex"})
    assert listed(client_for(catalog.world.outsider).get(theirs, query)) == [
        bytes(catalog.theirs.trace_id).hex()
    ]
    assert client_for(catalog.world.outsider).get(URL, query).status_code == 404


def test_every_filter_together(catalog: Catalog, plan: int) -> None:
    query = {
        "window": "24h", "pipeline": "rag-chat", "status": "ok", "min_duration_ms": "1000",
        "max_duration_ms": "5000", "stage": "retrieval", "stage_over_budget": "on",
        "attr": ["user.id=42", f"{MODEL}=gpt-4o-mini"], "sort": "slowest",
    }  # fmt: skip
    assert listed(client_for(catalog.world.viewer).get(URL, query)) == catalog.named("fresh")


def test_a_chosen_stage_shows_its_time_against_the_budget(catalog: Catalog, plan: int) -> None:
    response = client_for(catalog.world.viewer).get(
        URL, {"pipeline": "rag-chat", "stage": "retrieval"}
    )
    html = response.content.decode()
    assert listed(response) == catalog.named("fresh", "failed")
    assert 'Retrieval <span class="muted">/ 200 ms</span>' in html
    fresh = re.search(rf'<tr data-trace="{catalog.named("fresh")[0]}">(.*?)</tr>', html, re.S)
    failed = re.search(rf'<tr data-trace="{catalog.named("failed")[0]}">(.*?)</tr>', html, re.S)
    assert fresh is not None
    assert failed is not None
    assert '<span class="badge over">300 ms</span>' in fresh.group(1)
    assert '<td class="num">100 ms</td>' in failed.group(1)


def test_column_headers_switch_the_order_and_keep_the_filters(catalog: Catalog) -> None:
    html = (
        client_for(catalog.world.viewer)
        .get(URL, {"attr": ["user.id=42", f"{MODEL}=gpt-4o"], "status": "error"})
        .content.decode()
        .replace("&amp;", "&")
    )
    start = re.search(r'<th aria-sort="descending"><a href="([^"]+)"', html)
    assert start is not None
    assert parse_qs(urlsplit(start.group(1)).query) == {
        "attr": ["user.id=42", f"{MODEL}=gpt-4o"], "status": ["error"], "sort": ["oldest"],
    }  # fmt: skip
    duration = re.search(r'<th class="num"><a href="([^"]+)"[^>]*>Duration', html)
    assert duration is not None
    assert parse_qs(urlsplit(duration.group(1)).query)["sort"] == ["slowest"]


def test_the_page_restores_every_filter_from_its_url(catalog: Catalog) -> None:
    query = {
        "window": "7d", "pipeline": "rag-chat", "status": "error", "min_duration_ms": "10",
        "max_duration_ms": "9000", "stage": "retrieval", "attr": f"{MODEL}=gpt-4o",
        "sort": "oldest",
    }  # fmt: skip
    html = client_for(catalog.world.viewer).get(URL, query).content.decode()
    for name in ("window", "pipeline", "status", "stage"):
        select = re.search(rf'<select name="{name}"[^>]*>(.*?)</select>', html, re.S)
        assert select is not None
        assert f'value="{query[name]}" selected' in select.group(1), name
    sort = re.search(r'<select name="sort"[^>]*>(.*?)</select>', html, re.S)
    assert sort is not None
    assert '<option value="oldest" selected>' in sort.group(1)
    for name in ("min_duration_ms", "max_duration_ms"):
        assert re.search(rf'name="{name}" value="{query[name]}"', html), name
    assert f'name="attr" value="{MODEL}=gpt-4o"' in html
    assert listed_html(html) == catalog.named("failed")
    shared = {"pipeline": "rag-chat", "stage": "retrieval", "min_critical_share": "40"}
    html = client_for(catalog.world.viewer).get(URL, shared).content.decode()
    assert 'name="min_critical_share" value="40"' in html


def test_a_link_in_rfc_3339_shows_in_the_inputs_as_utc(catalog: Catalog) -> None:
    html = (
        client_for(catalog.world.viewer)
        .get(URL, {"from": "2026-01-02T12:30:00+02:00", "to": "2026-01-02T11:00:00Z"})
        .content.decode()
    )
    assert 'name="from" value="2026-01-02T10:30:00"' in html
    assert 'name="to" value="2026-01-02T11:00:00"' in html


def listed_html(html: str) -> list[str]:
    return re.findall(r'<tr data-trace="([0-9a-f]{32})">', html)


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"max_duration_ms": "x"}, "Enter a whole number."),
        ({"min_duration_ms": "20", "max_duration_ms": "10"}, "must not be under the shortest"),
        ({"max_duration_ms": "86400001"}, "from 0 to 86400000"),
        ({"sort": "random"}, "Use one of newest, oldest, slowest, fastest"),
        ({"attr": "user.id"}, "write an attribute filter as key=value"),
        ({"attr": "=42"}, "write an attribute filter as key=value"),
        ({"attr": "k" * 129 + "=1"}, "Attribute keys are at most 128 characters"),
        ({"attr": "k=" + "v" * 257}, "values longer than 256 characters"),
        ({"attr": "k=" + "v" * 5000}, "An attribute filter is at most 385 characters"),
        ({"attr": [f"k{i}=1" for i in range(6)]}, "At most 5 attribute filters"),
        ({"window": "2h"}, "Use one of 15m, 1h, 6h, 24h, 7d, 30d, or custom with from/to"),
        ({"window": "1h", "from": "2026-01-01T00:00"}, "either a named range or from/to"),
        ({"window": "custom"}, "Give the start of a custom range"),
        ({"to": "2026-01-01T00:00"}, "Give from along with to"),
        ({"from": "2026-01-02T00:00", "to": "2026-01-01T00:00"}, "must come after the start"),
        ({"from": "yesterday"}, "Write a time as YYYY-MM-DDTHH:MM"),
        ({"from": "9999-01-01T00:00"}, "between 1970 and 2262"),
        ({"from": "0001-01-01T00:00+05:00"}, "between 1970 and 2262"),
        ({"pipeline": "rag-chat", "stage": "generation", "stage_over_budget": "on"},
         "Generation has no budget to be over"),
        ({"pipeline": "rag-chat", "stage": "retrieval", "stage_over_budget": "maybe"},
         "Use true or false"),
        ({"status": "x" * 10_000}, "At most 385 characters"),
    ],
)  # fmt: skip
def test_malformed_filters_say_what_is_wrong_and_list_nothing(
    catalog: Catalog, query: dict[str, Any], message: str
) -> None:
    response = client_for(catalog.world.owner).get(URL, query)
    assert response.status_code == 200
    assert message in response.content.decode()
    assert listed(response) == []


@pytest.mark.parametrize("role", ["owner", "editor", "viewer"])
def test_every_member_filters_and_the_outsider_gets_404(catalog: Catalog, role: str) -> None:
    query = {"attr": "user.id=42", "sort": "slowest", "window": "24h"}
    response = client_for(getattr(catalog.world, role)).get(URL, query)
    assert listed(response) == catalog.named("failed", "fresh", "health")
    assert client_for(catalog.world.outsider).get(URL, query).status_code == 404
