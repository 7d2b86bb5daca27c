"""A newcomer's own traces in a real browser: stage rules that miss some of an ordinary
app's spans (the RAG chat preset with the rules of two stages removed, and a stage the
app does not have), the empty stages say so, and a rule made from the spans no stage
took is tested and saved in a few clicks.

The app is the one of an ordinary OpenTelemetry setup: ``POST /ask`` holding a
``retrieval`` span (with an embeddings call and a vector store query inside), a
``rerank`` span holding its HTTP call, and a streamed chat call, sent by the official
exporter. Any console error (a Content-Security-Policy violation is one) fails the test.
"""

import random
import time
from typing import Any

import pytest
from opentelemetry.trace import SpanKind
from opentelemetry.util.types import AttributeValue

from apps.demo.traffic.send import emit_trace
from apps.demo.traffic.traffic_plan import PlannedSpan, TracePlan
from apps.pipelines.models import Pipeline, SpanRule
from apps.pipelines.presets import pipeline_create_from_preset
from apps.teams.services import ingest_token_create
from tests.browser.test_dashboards import SCREENSHOTS
from tests.browser_support import browser_marks
from tests.builders.configuration import PASSWORD, make_rule, make_stage, make_team, make_user
from tests.sdk_sender import sdk_provider, workers_settle

pytestmark = browser_marks

TRACES = 120


def ordinary_request(rng: random.Random) -> TracePlan:
    """One ``POST /ask``, its times drawn around those of a small RAG app."""
    embed = rng.uniform(12, 30)
    query = rng.lognormvariate(4.6, 0.35)  # about 100 ms
    retrieval_end = 25 + embed + query + 5
    rerank = rng.lognormvariate(4.7, 0.3)
    rerank_end = retrieval_end + 5 + rerank + 4
    ttft = rng.uniform(180, 420)
    stream = rng.uniform(350, 900)
    chat_end = rerank_end + 8 + ttft + stream
    end = chat_end + 12
    kind, client = SpanKind.INTERNAL, SpanKind.CLIENT
    host = rng.choice(["api.cohere.com", "api.cohere.com", "api.jina.ai"])
    spans: list[tuple[int | None, str, SpanKind, float, float, dict[str, AttributeValue]]] = [
        (None, "POST /ask", SpanKind.SERVER, 0, end, {"http.request.method": "POST"}),
        (0, "retrieval", kind, 20, retrieval_end, {}),
        (1, "embeddings text-embedding-3-small", client, 22, 22 + embed,
         {"gen_ai.operation.name": "embeddings", "gen_ai.provider.name": "openai"}),
        (1, "query docs", client, 25 + embed, 25 + embed + query,
         {"db.system.name": "qdrant", "db.operation.name": "query",
          "db.collection.name": "docs"}),
        (0, "rerank", kind, retrieval_end + 5, rerank_end, {}),
        (4, "POST /v1/rerank", client, retrieval_end + 7, rerank_end - 2,
         {"http.request.method": "POST", "server.address": host}),
        (0, "chat gpt-4o-mini", client, rerank_end + 8, chat_end,
         {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini",
          "gen_ai.response.time_to_first_chunk": ttft / 1000}),
    ]  # fmt: skip
    return TracePlan(
        [
            PlannedSpan(index, parent, name, span_kind, start, stop, attributes)
            for index, (parent, name, span_kind, start, stop, attributes) in enumerate(spans)
        ]
    )


@pytest.fixture
def newcomer(live_server: Any) -> Pipeline:
    owner = make_user("olivia")
    team = make_team("acme", owner=owner)
    pipeline = pipeline_create_from_preset(
        team=team, preset="rag-chat", slug="ask", name="Ask", budget={"p95": 2500},
        match_root_span="POST /ask",
    )  # fmt: skip
    # Rules that miss this app: Retrieval and Rerank lost theirs, and an Auth stage looks
    # for spans the app does not have.
    SpanRule.objects.filter(
        stage__pipeline=pipeline, stage__slug__in=["retrieval", "rerank"]
    ).delete()
    make_rule(make_stage(pipeline, "auth", name="Auth", budget_ms=50), span_name="auth *")
    _, token = ingest_token_create(team=team, name="app", created_by=owner)
    provider = sdk_provider(live_server.url, token)
    tracer = provider.get_tracer("ask-api")
    rng = random.Random(28)
    now = time.time_ns()
    for number in range(TRACES):
        start = now - (40 * 60 - number * 20) * 1_000_000_000
        emit_trace(tracer=tracer, plan=ordinary_request(rng), start_ns=start)
    provider.shutdown()
    workers_settle()
    return pipeline


def test_an_empty_stage_explains_itself_and_a_rule_is_made_from_the_spans_no_stage_took(
    page: Any, live_server: Any, newcomer: Pipeline
) -> None:
    from playwright.sync_api import expect

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", "olivia")
    page.fill("input[name=password]", PASSWORD)
    page.get_by_role("button", name="Sign in").click()

    page.goto(f"{live_server.url}/teams/acme/dashboards/ask/?window=1h")
    rerank = page.locator('tr[data-stage="rerank"] [data-role=no-samples]')
    expect(rerank).to_contain_text(
        f"No span matched this stage's rules in {TRACES} traces of this pipeline over the "
        "last 1 hour."
    )
    # The groups come in after the page, in a card of their own.
    card = page.locator("#unmatched-spans.compact")
    expect(card.locator('tr[data-group="rerank"]')).to_be_visible()
    page.screenshot(path=str(SCREENSHOTS / "pipeline_empty_stage.png"), full_page=True)
    page.locator("#stage-table").screenshot(path=str(SCREENSHOTS / "pipeline_stage_table.png"))
    card.screenshot(path=str(SCREENSHOTS / "pipeline_unmatched_card.png"))

    rerank.get_by_role("link", name="unmatched spans inside this pipeline").click()
    page.wait_for_url("**/dashboards/ask/unmatched-spans/?window=1h")
    group = page.locator('tr[data-group="query docs"]')
    expect(group.locator("[data-role=traces]")).to_contain_text(f"{TRACES} 100 %")
    expect(group.locator("[data-role=attributes]")).to_contain_text("db.system.name qdrant")
    expect(group.locator("[data-role=suggestion]")).to_have_text("db.system.name=qdrant")
    expect(group.locator("select[name=stage]")).to_have_value("retrieval")
    page.screenshot(path=str(SCREENSHOTS / "unmatched_spans.png"), full_page=True)

    # A window picked in place swaps the groups without reloading the page.
    page.evaluate("window.__marker = 1")
    page.locator("select[name=window]").select_option("6h")
    expect(page.locator("#unmatched-spans")).to_have_attribute("data-window", "6h")
    assert page.evaluate("window.__marker") == 1

    rerank_group = page.locator('tr[data-group="rerank"]')
    expect(rerank_group.locator("select[name=stage]")).to_have_value("rerank")
    rerank_group.get_by_role("button", name="Make a rule").click()
    page.wait_for_url("**/unmatched-spans/rule/?*")
    matched = page.locator("#rule-test [data-role=matched]")
    expect(matched).to_have_text(str(TRACES))
    page.screenshot(path=str(SCREENSHOTS / "unmatched_rule_tester.png"), full_page=True)

    # Edited, the rule is tested again in place: a glob that takes the HTTP call too.
    page.fill("input[name=span_name]", "*rerank")
    expect(matched).to_have_text(str(2 * TRACES))
    page.fill("input[name=span_name]", "rerank")
    expect(matched).to_have_text(str(TRACES))
    page.get_by_role("button", name="Save rule").click()
    page.wait_for_url("**/unmatched-spans/?window=6h")
    expect(page.locator(".messages")).to_contain_text("added to Rerank")
    expect(page.locator('tr[data-group="rerank"]')).to_have_count(0)
    expect(page.locator('tr[data-group="POST /v1/rerank"]')).to_have_count(0)
    assert SpanRule.objects.filter(stage__slug="rerank", span_name="rerank").exists()

    trace = page.locator('tr[data-group="query docs"] .group-name a')
    trace.click()
    page.wait_for_url("**/traces/*/")
    verdict = page.locator('tr[data-stage="auth"] [data-role=verdict]')
    expect(verdict).to_contain_text("no span matched")
    expect(page.locator('tr[data-stage="rerank"] [data-role=verdict]')).not_to_contain_text(
        "no span matched"
    )
    page.screenshot(path=str(SCREENSHOTS / "trace_empty_stage.png"), full_page=True)
    page.locator("#stage-breakdown").screenshot(path=str(SCREENSHOTS / "trace_breakdown.png"))

    assert problems == []
