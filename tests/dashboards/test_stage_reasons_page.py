"""The trace page, the span panel and the traces API say, per span, which stage it counts
in and why; the breakdown counts inherited spans, to the nanosecond."""

import html
import re

import pytest

from apps.ingest.models import Trace
from tests.builders.api import token_client
from tests.builders.ingested_traces import hex_of, ingest, now_ns
from tests.conftest import TeamWorld, client_for
from tests.dashboards.ordinary_app import (
    ASK,
    CHAT,
    EMBED,
    FLUSH,
    LOG,
    QUERY,
    REDIS,
    RERANK_HTTP,
    RETRIEVAL,
    STREAM,
    newcomer_pipeline,
    ordinary_trace,
)
from tests.dashboards.test_trace_detail import cell, detail_url
from tests.timing import HOUR, MS

TRACE = 0xC1


@pytest.fixture
def page(world: TeamWorld) -> str:
    pipeline = newcomer_pipeline(world.team)
    ingest(world.team, ordinary_trace(TRACE, now_ns() - HOUR))
    assert Trace.objects.get(trace_id=TRACE.to_bytes(16, "big")).pipeline == pipeline
    response = client_for(world.viewer).get(detail_url(hex_of(TRACE)))
    assert response.status_code == 200
    return response.content.decode()


def stage_cell(page: str, span_id: int) -> tuple[str, str]:
    """The waterfall row's stage column: its text, and its title (the whole reason)."""
    row = re.search(rf'data-span="{span_id:016x}".*?data-role="span-stage">(.*?)</div>', page)
    assert row is not None, hex(span_id)
    title = re.search(rf'data-span="{span_id:016x}".*?<div class="wf-stage" title="([^"]*)"', page)
    assert title is not None
    text = re.sub(r"<[^>]+>", "", row.group(1))
    return " ".join(text.split()), html.unescape(title.group(1))


def test_each_row_says_its_stage_and_why(page: str) -> None:
    assert stage_cell(page, RETRIEVAL) == (
        "Retrieval rule 1",
        "Retrieval — rule 1: name = retrieval",
    )
    assert stage_cell(page, QUERY) == (
        "Retrieval inherited",
        f"Retrieval — inside `retrieval` (span {RETRIEVAL:016x})",
    )
    assert stage_cell(page, RERANK_HTTP)[0] == "Rerank inherited"
    assert stage_cell(page, FLUSH) == (
        "no stage no-stage rule 1",
        "no stage — no-stage rule 1: name = cache flush",
    )
    assert stage_cell(page, REDIS) == (
        "untracked inherited",
        f"untracked — inside `cache flush` (span {FLUSH:016x}), kept out of every stage by a "
        "no-stage rule",
    )
    assert stage_cell(page, LOG) == ("untracked no rule", "untracked — no rule, no stage above it")
    assert stage_cell(page, ASK)[0] == "untracked no rule"
    assert stage_cell(page, CHAT)[0] == "TTFT → Generation rules"
    assert stage_cell(page, STREAM) == (
        "TTFT → Generation inherited",
        "TTFT until the first token, then Generation — inside `chat gpt-4o-mini` "
        f"(span {CHAT:016x})",
    )


def test_the_breakdown_counts_what_the_stage_spans_hold(page: str) -> None:
    # Retrieval: its own 7 ms on the path, the embeddings call's 15 and the query's 145;
    # the flush (3 ms with its redis call) stays out of it.
    assert cell(page, "retrieval", "critical") == "167 ms"
    assert cell(page, "retrieval", "wall") == "170 ms"
    assert cell(page, "rerank", "critical") == "120 ms"
    assert cell(page, "ttft", "critical") == "250 ms"
    assert cell(page, "generation", "critical") == "400 ms"
    # The server's own 50 ms, the log write's 10 and the flush's 3.
    assert re.search(r'data-role="untracked">63 ms<', page)
    assert 'data-adds-up="true"' in page


def test_the_span_panel_says_where_the_span_counts_and_links_its_ancestor(
    world: TeamWorld, page: str
) -> None:
    response = client_for(world.viewer).get(
        f"{detail_url(hex_of(TRACE))}?span={QUERY:016x}", headers={"HX-Request": "true"}
    )
    panel = response.content.decode()
    reason = re.search(r'data-role="stage-reason">(.*?)</dd>', panel, re.S)
    assert reason is not None
    text = " ".join(re.sub(r"<[^>]+>", "", html.unescape(reason.group(1))).split())
    assert text == (
        f"Retrieval — inside retrieval (span {RETRIEVAL:016x}), whose stage it inherits: no "
        "rule takes this span itself"
    )
    assert f'hx-get="?span={RETRIEVAL:016x}"' in reason.group(1)


def test_the_span_panel_of_a_span_a_rule_took_names_the_rule(world: TeamWorld, page: str):
    client = client_for(world.viewer)
    for span_id, expected in [
        (RETRIEVAL, "Retrieval — rule 1: name = retrieval"),
        (FLUSH, "no stage — no-stage rule 1: name = cache flush"),
        (LOG, "untracked — no rule takes it, and no span above it is in a stage"),
        (
            CHAT,
            "TTFT until the first token, then Generation — TTFT rule 1: "
            "gen_ai.operation.name=chat, until first token; Generation rule 1: "
            "gen_ai.operation.name=chat, after first token",
        ),
    ]:
        body = client.get(f"{detail_url(hex_of(TRACE))}?span={span_id:016x}").content.decode()
        reason = re.search(r'data-role="stage-reason">(.*?)</dd>', body, re.S)
        assert reason is not None
        assert " ".join(re.sub(r"<[^>]+>", "", html.unescape(reason.group(1))).split()) == (
            expected
        )


def test_the_traces_api_gives_each_span_its_stage_and_reason(world: TeamWorld, page: str):
    body = token_client(world.viewer).get(f"/api/v1/traces/{hex_of(TRACE)}/").json()
    spans = {item["span_id"]: item for item in body["spans"]}
    retrieval_rule = world.team.pipelines.get().stages.get(slug="retrieval").rules.get()
    flush_rule = world.team.pipelines.get().no_stage_rules.get()

    assert spans[f"{RETRIEVAL:016x}"]["stage"] == "retrieval"
    assert spans[f"{RETRIEVAL:016x}"]["stage_reason"] == {
        "kind": "rule",
        "rules": [
            {
                "id": retrieval_rule.pk,
                "stage": "retrieval",
                "number": 1,
                "description": "name = retrieval",
            }
        ],
        "inherited_from": None,
        "text": "Retrieval — rule 1: name = retrieval",
    }
    assert spans[f"{EMBED:016x}"]["stage"] == "retrieval"
    assert spans[f"{EMBED:016x}"]["stage_reason"] == {
        "kind": "inherited",
        "rules": [],
        "inherited_from": f"{RETRIEVAL:016x}",
        "text": f"Retrieval — inside `retrieval` (span {RETRIEVAL:016x})",
    }
    assert spans[f"{FLUSH:016x}"]["stage"] is None
    assert spans[f"{FLUSH:016x}"]["stage_reason"]["kind"] == "no_stage_rule"
    assert spans[f"{FLUSH:016x}"]["stage_reason"]["rules"][0] == {
        "id": flush_rule.pk,
        "stage": None,
        "number": 1,
        "description": "name = cache flush",
    }
    assert spans[f"{REDIS:016x}"]["stage_reason"]["inherited_from"] == f"{FLUSH:016x}"
    assert spans[f"{LOG:016x}"]["stage_reason"]["kind"] == "untracked"
    assert spans[f"{STREAM:016x}"]["stage"] == "ttft"
    assert [p["stage"] for p in spans[f"{STREAM:016x}"]["parts"]] == ["ttft", "generation"]
    assert [rule["stage"] for rule in spans[f"{CHAT:016x}"]["stage_reason"]["rules"]] == [
        "ttft",
        "generation",
    ]
    breakdown = body["breakdown"]
    critical = {stage["slug"]: stage["critical_ns"] for stage in breakdown["stages"]}
    assert critical == {
        "retrieval": 167 * MS,
        "rerank": 120 * MS,
        "ttft": 250 * MS,
        "generation": 400 * MS,
    }
    assert breakdown["untracked_critical_ns"] == 63 * MS
    assert breakdown["adds_up"]


def test_without_the_no_stage_rule_the_flush_counts_in_retrieval(world: TeamWorld) -> None:
    newcomer_pipeline(world.team, no_stage=False)
    ingest(world.team, ordinary_trace(TRACE, now_ns() - HOUR))
    page = client_for(world.viewer).get(detail_url(hex_of(TRACE))).content.decode()
    assert cell(page, "retrieval", "critical") == "170 ms"
    assert re.search(r'data-role="untracked">60 ms<', page)
    assert stage_cell(page, REDIS)[0] == "Retrieval inherited"
