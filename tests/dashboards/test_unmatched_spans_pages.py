"""A stage with no samples explains itself on the pipeline, stage and trace pages; the
unmatched spans page, its fragment and its API; rules made from it, tested, then saved."""

import re
from html import unescape
from typing import Any

import pytest
from django.test import Client

from apps.pipelines.models import Pipeline, SpanRule
from tests.builders.api import session_client, token_client
from tests.conftest import TeamWorld, client_for
from tests.dashboards.unmatched_spans_data import OPERATION, ask_traffic

MEMBERS = ["owner", "editor", "viewer"]
PIPELINE_URL = "/teams/acme/dashboards/ask/"
URL = "/teams/acme/dashboards/ask/unmatched-spans/"
RULE_URL = "/teams/acme/dashboards/ask/unmatched-spans/rule/"
API_URL = "/api/v1/pipelines/ask/unmatched-spans"
TIMES = "\N{MULTIPLICATION SIGN}"


@pytest.fixture
def ask(world: TeamWorld, clean_cache: None) -> Pipeline:
    return ask_traffic(world)


def text(html: str) -> str:
    spaced = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", unescape(html))).strip()
    return re.sub(r" ([,.:;])", r"\1", spaced)


def row(html: str, stage: str) -> str:
    found = re.search(rf'<tr[^>]*data-stage="{stage}"[^>]*>(.*?)</tr>', html, re.S)
    assert found is not None, stage
    return found.group(1)


def groups(html: str) -> dict[str, dict[str, str]]:
    """Each group row's cells by data-role, by span name."""
    found = {}
    for name, cells in re.findall(r'<tr data-group="([^"]*)"[^>]*>(.*?)</tr>', html, re.S):
        roles = re.findall(r'<td[^>]*data-role="([a-z0-9]+)">(.*?)</td>', cells, re.S)
        found[unescape(name)] = {role: text(value) for role, value in roles}
    return found


# --- the pipeline, stage and trace pages ------------------------------------------------


def test_a_stage_without_samples_says_no_span_matched_its_rules(world: TeamWorld, ask: Any) -> None:
    html = client_for(world.viewer).get(PIPELINE_URL, {"window": "1h"}).content.decode()
    rerank = row(html, "rerank")
    assert text(re.search(r'data-role="no-samples">(.*?)</td>', rerank, re.S).group(1)) == (  # type: ignore[union-attr]
        "No span matched this stage's rules in 3 traces of this pipeline over the last "
        "1 hour. Its rules · unmatched spans inside this pipeline"
    )
    links = re.findall(r'href="([^"]+)"', rerank)
    stage_id = ask.stages.get(slug="rerank").pk
    assert f"/teams/acme/pipelines/ask/#stage-{stage_id}" in links
    assert f"{URL}?window=1h" in links
    # A stage with samples shows its figures, not the explanation.
    assert "no-samples" not in row(html, "retrieval")
    # The page loads the spans no stage took, for the same window.
    assert f'hx-get="{URL}?window=1h&amp;compact=1"' in html


def test_a_range_of_30_days_links_to_the_longest_window_of_stored_spans(
    world: TeamWorld, ask: Any
) -> None:
    html = client_for(world.owner).get(PIPELINE_URL, {"window": "30d"}).content.decode()
    assert "over the last 30 days" in text(row(html, "embedding"))
    assert f"{URL}?window=7d" in row(html, "embedding")


def test_without_traces_an_empty_stage_says_there_were_none(world: TeamWorld) -> None:
    ask_traffic(world, count=0)
    html = client_for(world.owner).get(PIPELINE_URL).content.decode()
    assert "No trace of this pipeline over the last 1 hour." in text(row(html, "rerank"))
    assert 'id="unmatched-spans"' not in html  # nothing to take apart


def test_the_stage_page_of_an_empty_stage_explains_it(world: TeamWorld, ask: Any) -> None:
    html = client_for(world.viewer).get(f"{PIPELINE_URL}stages/rerank/").content.decode()
    note = re.search(r'data-role="no-samples">(.*?)</p>', html, re.S)
    assert note is not None
    assert text(note.group(1)).startswith(
        "No span matched this stage's rules in 3 traces of this pipeline over the last 1 hour."
    )
    assert f"{URL}?window=1h" in html
    retrieval = client_for(world.viewer).get(f"{PIPELINE_URL}stages/retrieval/").content.decode()
    assert 'data-role="no-samples"' not in retrieval
    assert "Unmatched spans" in retrieval  # the page's own link to the view


def test_the_trace_page_says_no_span_matched_for_an_empty_stage(world: TeamWorld, ask: Any) -> None:
    trace_hex = f"{0xA0:032x}"
    html = client_for(world.viewer).get(f"/teams/acme/traces/{trace_hex}/").content.decode()
    verdict = re.search(r'data-role="verdict">(.*?)</td>', row(html, "rerank"), re.S)
    assert verdict is not None
    assert text(verdict.group(1)) == "no span matched rules · unmatched spans"
    assert "ok" not in text(verdict.group(1)).split()
    # A stage this trace reached is judged against its budget as before.
    reached = re.search(r'data-role="verdict">(.*?)</td>', row(html, "retrieval"), re.S)
    assert reached is not None
    assert text(reached.group(1)) == "ok"


def test_the_trace_api_judges_no_budget_for_a_stage_no_span_reached(
    world: TeamWorld, ask: Any
) -> None:
    body = session_client(world.owner).get(f"/api/v1/traces/{0xA0:032x}/", {"team": "acme"})
    stages = {s["slug"]: s for s in body.json()["breakdown"]["stages"]}
    assert (stages["rerank"]["span_count"], stages["rerank"]["over"]) == (0, None)
    assert (stages["retrieval"]["span_count"], stages["retrieval"]["over"]) == (2, False)


# --- the unmatched spans page -----------------------------------------------------------


@pytest.mark.parametrize("role", MEMBERS)
def test_every_member_sees_the_spans_no_stage_took(world: TeamWorld, ask: Any, role: str) -> None:
    response = client_for(getattr(world, role)).get(URL)
    assert response.status_code == 200
    html = response.content.decode()
    assert groups(html) == {
        "POST /v1/rerank": {"spans": "3", "traces": "3 100 %", "total": "330 ms",
                            "critical": "330 ms 19 %", "p50": "110 ms",
                            "attributes": "http.request.method POST server.address "
                                          f"api.cohere.com 2{TIMES}, api.jina.ai 1{TIMES}"},
        "rerank": {"spans": "3", "traces": "3 100 %", "total": "360 ms",
                   "critical": "30 ms 2 % 360 ms with what it holds", "p50": "120 ms",
                   "attributes": "none of the usual ones"},
        "embed query": {"spans": "2", "traces": "2 67 %", "total": "23 ms",
                        "critical": "23 ms 1 %", "p50": "11.5 ms",
                        "attributes": "gen_ai.operation.name embeddings"},
    }  # fmt: skip
    untracked = text(re.search(r'data-role="untracked">(.*?)</dl>', html, re.S).group(1))  # type: ignore[union-attr]
    assert untracked.startswith(
        "Untracked on the critical path 58.0 % of the end-to-end time: 1.74 s of 3 s over "
        "these traces"
    )
    assert "the root span's own time 112 ms" in untracked
    assert "parts no stage took 1.2 s" in untracked
    assert "no stage on purpose 45 ms" in untracked
    empty = text(re.search(r'data-role="empty-stages">(.*?)</p>', html, re.S).group(1))  # type: ignore[union-attr]
    assert empty.startswith("No span of these traces reached Embedding, Rerank")


def test_a_group_inside_another_says_a_rule_for_that_one_takes_it_too(
    world: TeamWorld, ask: Any
) -> None:
    html = client_for(world.editor).get(URL).content.decode()
    rows = re.findall(r'<tr data-group="([^"]*)"[^>]*>(.*?)</tr>', html, re.S)
    inside = [
        (name, re.search(r'data-role="inside">(.*?)</p>', cells, re.S)) for name, cells in rows
    ]
    assert [(name, text(note.group(1))) for name, note in inside if note] == [
        ("POST /v1/rerank", "Inside rerank: a rule for that takes these too.")
    ]


def test_editors_and_owners_get_a_rule_per_group_viewers_none(world: TeamWorld, ask: Any) -> None:
    for role in ("owner", "editor"):
        html = client_for(getattr(world, role)).get(URL).content.decode()
        forms = re.findall(rf'<form method="get" action="{RULE_URL}">(.*?)</form>', html, re.S)
        assert len(forms) == 3
        assert "Make a rule" in forms[0]
    viewer = client_for(world.viewer).get(URL).content.decode()
    assert RULE_URL not in viewer
    assert "Make a rule" not in viewer


def test_each_rule_form_carries_its_suggestion_and_stage(world: TeamWorld, ask: Any) -> None:
    html = client_for(world.editor).get(URL, {"window": "6h"}).content.decode()
    found = {}
    for name, cells in re.findall(r'<tr data-group="([^"]*)"[^>]*>(.*?)</tr>', html, re.S):
        hidden = dict(re.findall(r'type="hidden" name="([^"]+)" value="([^"]*)"', cells))
        selected = re.search(r'<option value="([^"]+)" selected>', cells)
        assert selected is not None
        found[unescape(name)] = ({k: unescape(v) for k, v in hidden.items()}, selected.group(1))
    assert found == {
        "POST /v1/rerank": ({"span_name": "POST /v1/rerank", "name_match": "glob",
                             "window": "6h"}, "rerank"),
        "rerank": ({"span_name": "rerank", "name_match": "glob", "window": "6h"}, "rerank"),
        "embed query": ({"attributes": f"{OPERATION}=embeddings", "name_match": "glob",
                         "window": "6h"}, "embedding"),
    }  # fmt: skip


def test_the_fragment_is_the_groups_alone(world: TeamWorld, ask: Any) -> None:
    response = client_for(world.viewer).get(URL, {"compact": "1"}, HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="unmatched-spans"')
    assert "<html" not in html
    assert set(groups(html)) == {"POST /v1/rerank", "rerank", "embed query"}
    assert "All unmatched spans" in html
    assert response["Vary"] == "HX-Request" or "HX-Request" in response["Vary"]


@pytest.mark.parametrize("window", ["", "2h", "x" * 500, "24h'--", "30d"])
def test_a_window_not_offered_reads_the_default(world: TeamWorld, ask: Any, window: str) -> None:
    response = client_for(world.viewer).get(URL, {"window": window})
    assert response.status_code == 200
    assert 'data-window="24h"' in response.content.decode()


def test_outsider_gets_404(world: TeamWorld, ask: Any) -> None:
    outsider = client_for(world.outsider)
    assert outsider.get(URL).status_code == 404
    assert outsider.get(RULE_URL, {"stage": "rerank", "span_name": "rerank"}).status_code == 404
    assert outsider.post(RULE_URL, {"stage": "rerank", "span_name": "rerank"}).status_code == 404
    # globex has a pipeline of the same slug: still none of acme's spans.
    assert outsider.get("/teams/globex/dashboards/ask/unmatched-spans/").status_code == 404


def test_anonymous_is_sent_to_log_in(ask: Any) -> None:
    assert Client().get(URL).status_code == 302


def test_an_unknown_pipeline_is_a_404(world: TeamWorld, ask: Any) -> None:
    response = client_for(world.owner).get("/teams/acme/dashboards/nope/unmatched-spans/")
    assert response.status_code == 404


# --- a rule from a group: tested, then saved -------------------------------------------


def test_the_rule_page_tests_the_suggested_rule_on_recent_traces(
    world: TeamWorld, ask: Any
) -> None:
    query = {"stage": "rerank", "span_name": "rerank", "name_match": "glob", "window": "1h"}
    html = client_for(world.editor).get(RULE_URL, query).content.decode()
    # Pre-filled, and already tested: three rerank spans in three of the three traces.
    assert re.search(r'<option value="rerank" selected>', html)
    assert 'name="span_name" value="rerank"' in html
    assert re.search(r'data-role="matched">3<', html)
    assert re.search(r'data-role="traces">3<', html)
    assert 'name="window" value="1h"' in html


def test_the_rule_page_answers_htmx_with_the_test_alone(world: TeamWorld, ask: Any) -> None:
    query = {"stage": "embedding", "attributes": f"{OPERATION}=embeddings", "name_match": "glob"}
    response = client_for(world.owner).get(RULE_URL, query, HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="rule-test"')
    assert re.search(r'data-role="matched">2<', html)
    assert re.search(r'data-role="traces">2<', html)


def test_a_chat_rule_for_the_first_token_stage_takes_its_portion(
    world: TeamWorld, ask: Any
) -> None:
    query = {"stage": "ttft", "attributes": f"{OPERATION}=chat"}
    html = client_for(world.owner).get(RULE_URL, query).content.decode()
    assert re.search(r'<option value="until_first_token" selected>', html)


def test_saving_the_rule_adds_it_to_the_stage_and_the_group_goes(
    world: TeamWorld, ask: Any
) -> None:
    client = client_for(world.editor)
    data = {"stage": "rerank", "span_name": "rerank", "name_match": "glob", "portion": "whole",
            "first_token_event": "first_token", "window": "6h"}  # fmt: skip
    response = client.post(RULE_URL, data)
    assert response.status_code == 302
    assert response["Location"] == f"{URL}?window=6h"
    rule = SpanRule.objects.get(stage__pipeline=ask, stage__slug="rerank", span_name="rerank")
    assert rule.position == 1  # after the stage's own rule
    html = client.get(response["Location"]).content.decode()
    assert "added to Rerank" in html
    # The rerank span now holds its HTTP call too: only the embeddings calls are left.
    assert set(groups(html)) == {"embed query"}


def test_a_viewer_can_neither_open_nor_save_a_rule(world: TeamWorld, ask: Any) -> None:
    viewer = client_for(world.viewer)
    query = {"stage": "rerank", "span_name": "rerank"}
    assert viewer.get(RULE_URL, query).status_code == 403
    assert (
        viewer.post(RULE_URL, {**query, "portion": "whole", "name_match": "glob"}).status_code
        == 403
    )
    assert not SpanRule.objects.filter(span_name="rerank").exists()


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"stage": "nope", "span_name": "rerank"}, "stage"),
        ({"span_name": "rerank"}, "stage"),
        ({"stage": "rerank", "span_name": "x" * 501}, "span_name"),
        ({"stage": "rerank", "attributes": "no equals sign"}, "attributes"),
        ({"stage": "rerank", "span_name": "(", "name_match": "regex"}, "span_name"),
        ({"stage": "rerank", "span_name": "a", "portion": "most"}, "portion"),
    ],
)
def test_a_malformed_rule_is_refused_with_its_error_and_nothing_saved(
    world: TeamWorld, ask: Any, data: dict[str, str], field: str
) -> None:
    before = SpanRule.objects.count()
    response = client_for(world.owner).post(
        RULE_URL, {"name_match": "glob", "portion": "whole", **data}
    )
    assert response.status_code == 422
    html = response.content.decode()
    assert f'id="id_{field}_error"' in html
    assert SpanRule.objects.count() == before


def test_a_rule_with_no_condition_is_not_tested(world: TeamWorld, ask: Any) -> None:
    html = client_for(world.owner).get(RULE_URL, {"stage": "rerank"}).content.decode()
    assert "A rule with no condition matches every span" in html


# --- the API ----------------------------------------------------------------------------


@pytest.mark.parametrize("role", MEMBERS)
def test_the_api_gives_the_groups_to_every_member(world: TeamWorld, ask: Any, role: str) -> None:
    response = token_client(getattr(world, role)).get(API_URL, {"team": "acme", "window": "1h"})
    assert response.status_code == 200
    body = response.json()
    assert body["window"] == "1h"
    assert body["sample"] == {"traces": 3, "spans": 26, "bytes_read": body["sample"]["bytes_read"],
                              "byte_budget": 16 * 1024 * 1024, "span_cap": 20_000,
                              "stopped_by": ""}  # fmt: skip
    assert body["end_to_end_ms"] == 3000.0
    assert body["untracked"] == {
        "critical_ms": 1740.0, "share": 0.58, "unmatched_ms": 383.0, "root_ms": 112.0,
        "partial_ms": 1200.0, "no_stage_ms": 45.0,
    }  # fmt: skip
    assert [(s["slug"], s["traces"]) for s in body["stages"]] == [
        ("embedding", 0), ("retrieval", 3), ("rerank", 0), ("ttft", 3),
    ]  # fmt: skip
    assert body["group_count"] == 3
    http, _, embed = body["groups"]
    assert http == {
        "name": "POST /v1/rerank", "service": "chat-api", "kind": "client", "spans": 3,
        "traces": 3, "trace_share": 1.0, "total_ms": 330.0, "critical_ms": 330.0,
        "untracked_share": pytest.approx(330 / 1740), "held_critical_ms": 330.0,
        "inside": {"name": "rerank", "service": "chat-api", "kind": "internal"}, "p50_ms": 110.0,
        "attributes": [
            {"key": "http.request.method", "spans": 3, "distinct": 1,
             "values": [{"value": "POST", "spans": 3}]},
            {"key": "server.address", "spans": 3, "distinct": 2,
             "values": [{"value": "api.cohere.com", "spans": 2},
                        {"value": "api.jina.ai", "spans": 1}]},
        ],
        "example_trace_id": f"{0xA0:032x}",
        "suggested_rule": {"stage": "rerank", "describe": "name=POST /v1/rerank",
                           "rule": {"span_name": "POST /v1/rerank", "name_match": "glob"}},
    }  # fmt: skip
    assert embed["suggested_rule"]["rule"] == {
        "attributes": {OPERATION: "embeddings"},
        "name_match": "glob",
    }


def test_a_suggested_rule_posts_as_it_is_to_the_rules_api(world: TeamWorld, ask: Any) -> None:
    client = token_client(world.editor)
    body = client.get(API_URL, {"team": "acme"}).json()
    suggestion = body["groups"][2]["suggested_rule"]
    created = client.post(
        f"/api/v1/pipelines/ask/stages/{suggestion['stage']}/rules/?team=acme",
        suggestion["rule"],
        format="json",
    )
    assert created.status_code == 201
    after = client.get(API_URL, {"team": "acme"}).json()
    assert [g["name"] for g in after["groups"]] == ["POST /v1/rerank", "rerank"]
    assert [s["slug"] for s in after["stages"] if not s["traces"]] == ["rerank"]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"window": "2h"}, "window"),
        ({"window": "x" * 1000}, "window"),
        ({"limit": "0"}, "limit"),
        ({"limit": "51"}, "limit"),
        ({"limit": "ten"}, "limit"),
    ],
)
def test_the_api_refuses_a_malformed_query(
    world: TeamWorld, ask: Any, query: dict[str, str], field: str
) -> None:
    response = token_client(world.owner).get(API_URL, {"team": "acme", **query})
    assert response.status_code == 400
    assert field in str(response.json())


def test_the_api_limits_the_groups(world: TeamWorld, ask: Any) -> None:
    body = token_client(world.owner).get(API_URL, {"team": "acme", "limit": "1"}).json()
    assert [g["name"] for g in body["groups"]] == ["POST /v1/rerank"]
    assert body["group_count"] == 3


def test_the_api_is_a_404_for_an_outsider_and_another_teams_pipeline(
    world: TeamWorld, ask: Any
) -> None:
    outsider = token_client(world.outsider)
    assert outsider.get(API_URL, {"team": "acme"}).status_code == 404
    assert outsider.get(API_URL, {"team": "globex"}).status_code == 404
    assert Client().get(API_URL, {"team": "acme"}).status_code in (401, 403)


def test_the_page_links_back_to_the_team_level_unmatched_traffic(
    world: TeamWorld, ask: Any
) -> None:
    html = client_for(world.owner).get(URL).content.decode()
    assert 'href="/teams/acme/traces/unmatched/"' in html
