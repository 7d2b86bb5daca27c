"""One trace: access by hex id, the stage breakdown on a hand-made trace, the waterfall."""

import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from apps.analysis.selectors import trace_analysis
from apps.ingest.models import Trace
from apps.pipelines.services import stage_delete
from tests.builders.ingested_traces import Explorer, hex_of
from tests.builders.spans import AUTH, LLM, RETR_A, RETR_B, ROOT
from tests.builders.stored_spans import trace_without_spans
from tests.conftest import client_for
from tests.timing import MS

MEMBERS = ["owner", "editor", "viewer"]


def detail_url(trace: Trace | str, team_slug: str = "acme") -> str:
    trace_hex = trace if isinstance(trace, str) else bytes(trace.trace_id).hex()
    return reverse("traces:detail", kwargs={"team_slug": team_slug, "trace_hex": trace_hex})


def cell(html: str, stage: str, role: str) -> str:
    row = re.search(rf'<tr[^>]*data-stage="{stage}">(.*?)</tr>', html, re.S)
    assert row is not None, stage
    value = re.search(rf'data-role="{role}">(.*?)</td>', row.group(1), re.S)
    assert value is not None, (stage, role)
    return re.sub(r"<[^>]+>", "", value.group(1)).strip()


@pytest.mark.parametrize("role", MEMBERS)
def test_every_member_can_view_a_trace(explorer: Explorer, role: str) -> None:
    response = client_for(getattr(explorer.world, role)).get(detail_url(explorer.ok))
    assert response.status_code == 200
    assert hex_of(0xA1) in response.content.decode()


def test_outsider_gets_404(explorer: Explorer) -> None:
    assert client_for(explorer.world.outsider).get(detail_url(explorer.ok)).status_code == 404


def test_anonymous_is_sent_to_log_in(explorer: Explorer) -> None:
    response = Client().get(detail_url(explorer.ok))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_another_teams_trace_id_is_a_404(explorer: Explorer) -> None:
    # globex's trace, asked for under acme by acme's owner.
    assert client_for(explorer.world.owner).get(detail_url(explorer.theirs)).status_code == 404
    # and acme's trace asked for under globex by globex's owner.
    outsider = client_for(explorer.world.outsider)
    assert outsider.get(detail_url(explorer.ok, "globex")).status_code == 404
    assert outsider.get(detail_url(explorer.theirs, "globex")).status_code == 200


@pytest.mark.parametrize(
    "trace_hex",
    ["xyz", "a1", "0" * 31, "0" * 33, "g" * 32, "0" * 30 + "a1" + "00", " " + "0" * 31, "0" * 32],
)
def test_malformed_or_unknown_hex_is_a_404(explorer: Explorer, trace_hex: str) -> None:
    response = client_for(explorer.world.owner).get(
        f"/teams/acme/traces/{trace_hex.replace(' ', '%20')}/"
    )
    assert response.status_code == 404


def test_upper_case_hex_finds_the_trace(explorer: Explorer) -> None:
    response = client_for(explorer.world.owner).get(detail_url(hex_of(0xA1).upper()))
    assert response.status_code == 200


def test_the_breakdown_adds_critical_path_and_untracked_up_to_the_duration(
    explorer: Explorer,
) -> None:
    html = client_for(explorer.world.viewer).get(detail_url(explorer.ok)).content.decode()
    expected = {
        "auth": ("50 ms", "50 ms", "5.0%"),
        "retrieval": ("250 ms", "250 ms", "25.0%"),
        "ttft": ("200 ms", "200 ms", "20.0%"),
        "generation": ("450 ms", "450 ms", "45.0%"),
    }
    for stage, (wall, critical, share) in expected.items():
        assert cell(html, stage, "wall") == wall
        assert cell(html, stage, "critical") == critical
        assert cell(html, stage, "share") == share
    assert cell(html, "", "untracked") == "50 ms"
    assert cell(html, "auth", "verdict") == "ok"
    assert cell(html, "retrieval", "verdict") == "over"  # 250 ms against 200
    assert cell(html, "ttft", "verdict") == "ok"
    assert cell(html, "generation", "verdict") == ""  # no budget
    assert 'data-adds-up="true"' in html
    assert re.search(r'data-role="critical-sum">1 s<', html)
    assert re.search(r'data-role="e2e"><strong>1 s<', html)


def test_the_analysis_numbers_are_exact_in_nanoseconds(explorer: Explorer) -> None:
    analysis = trace_analysis(trace=explorer.ok)
    by_slug = {item.stage.slug: item for item in analysis.stages}
    assert {slug: (i.wall_ns, i.critical_ns, i.span_count) for slug, i in by_slug.items()} == {
        "auth": (50 * MS, 50 * MS, 1),
        "retrieval": (250 * MS, 250 * MS, 2),
        "ttft": (200 * MS, 200 * MS, 1),
        "generation": (450 * MS, 450 * MS, 1),
    }
    assert analysis.untracked_critical_ns == 50 * MS
    assert analysis.e2e_ns == 1000 * MS == explorer.ok.duration_ns
    assert analysis.critical_sum_ns == analysis.e2e_ns
    # The stored stage samples written at finalization agree.
    assert explorer.ok.untracked_critical_ns == analysis.untracked_critical_ns


def test_the_waterfall_lists_spans_in_tree_order_with_the_critical_path_marked(
    explorer: Explorer,
) -> None:
    html = client_for(explorer.world.owner).get(detail_url(explorer.ok)).content.decode()
    rows = re.findall(
        r'<div class="wf-row([^"]*)" data-span="([0-9a-f]{16})" data-depth="(\d)"', html
    )
    order = [int(span, 16) for _, span, _ in rows]
    assert order == [ROOT, AUTH, RETR_A, RETR_B, LLM]
    assert [int(depth) for _, _, depth in rows] == [0, 1, 1, 1, 1]
    on_path = {int(span, 16) for classes, span, _ in rows if "on-path" in classes}
    assert on_path == {ROOT, AUTH, RETR_B, LLM}  # the faster search waits on nobody
    llm = html[html.index(f'data-span="{LLM:016x}"') :]
    llm = llm[: llm.index('<div class="wf-ms">')]
    assert 'data-stage="ttft"' in llm
    assert 'data-stage="generation"' in llm
    assert llm.count('class="wf-critical"') == 2


def test_an_error_trace_shows_the_failing_span(explorer: Explorer) -> None:
    html = client_for(explorer.world.owner).get(detail_url(explorer.errored)).content.decode()
    assert f'<div class="wf-row error on-path" data-span="{LLM:016x}"' in html
    assert "upstream timeout" in html


def test_an_unmatched_trace_charges_everything_to_untracked(explorer: Explorer) -> None:
    html = client_for(explorer.world.owner).get(detail_url(explorer.batch)).content.decode()
    assert "matched no pipeline" in html
    assert cell(html, "", "untracked") == "500 ms"
    assert 'data-adds-up="true"' in html


def test_an_incomplete_trace_says_its_root_is_missing(explorer: Explorer) -> None:
    html = client_for(explorer.world.owner).get(detail_url(explorer.orphans)).content.decode()
    assert "the root span never arrived" in html
    assert 'data-adds-up="true"' in html


def test_a_big_trace_shows_the_first_spans_with_a_note(
    explorer: Explorer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("apps.dashboards.views.traces.MAX_WATERFALL_SPANS", 2)
    html = client_for(explorer.world.owner).get(detail_url(explorer.ok)).content.decode()
    assert len(re.findall(r'data-span="[0-9a-f]{16}"', html)) == 2
    assert "Showing the first 2 of 5 spans" in html
    # The breakdown still covers every span.
    assert cell(html, "generation", "critical") == "450 ms"


def test_once_spans_aged_out_the_breakdown_comes_from_the_stage_samples(
    explorer: Explorer,
) -> None:
    aged = trace_without_spans(explorer.ok, trace_id=0xA8)
    html = client_for(explorer.world.owner).get(detail_url(aged)).content.decode()
    assert "no longer stored" in html
    assert cell(html, "retrieval", "critical") == "250 ms"
    assert cell(html, "", "untracked") == "50 ms"
    assert 'data-adds-up="true"' in html
    assert 'id="waterfall"' not in html


def test_a_stage_removed_since_finalization_is_flagged_as_not_adding_up(
    explorer: Explorer,
) -> None:
    aged = trace_without_spans(explorer.ok, trace_id=0xA8)
    stage_delete(stage=explorer.pipeline.stages.get(slug="auth"))
    html = client_for(explorer.world.owner).get(detail_url(aged)).content.decode()
    assert 'data-adds-up="false"' in html


def test_with_spans_a_changed_pipeline_is_recomputed_and_still_adds_up(
    explorer: Explorer,
) -> None:
    stage_delete(stage=explorer.pipeline.stages.get(slug="auth"))
    html = client_for(explorer.world.owner).get(detail_url(explorer.ok)).content.decode()
    assert cell(html, "", "untracked") == "100 ms"  # auth's 50 ms are now untracked
    assert 'data-adds-up="true"' in html


def test_posting_is_not_allowed(explorer: Explorer) -> None:
    response = client_for(explorer.world.owner).post(detail_url(explorer.ok))
    assert response.status_code == 405


def _stored_now(world: Any, trace_id: int) -> None:
    """A RAG trace ending now, stored but not yet analyzed."""
    from apps.ingest.models import Encoding
    from apps.ingest.services.batches import raw_batch_store, raw_batches_drain
    from tests.builders.ingested_traces import now_ns
    from tests.builders.spans import encode, rag_spans

    spans = rag_spans(trace_id, now_ns())
    raw_batch_store(
        team=world.team, token=None, encoding=Encoding.OTLP_PROTOBUF, body=encode(spans),
        span_count=len(spans),
    )  # fmt: skip
    raw_batches_drain()


def test_a_trace_still_assembling_is_viewable_but_not_listed(world: Any) -> None:
    _stored_now(world, 0xF1)
    client = client_for(world.viewer)
    html = client.get(detail_url(hex_of(0xF1))).content.decode()
    receiving = re.search(r'data-role="receiving">([^<]*)<', html)
    assert receiving
    assert receiving.group(1).startswith("Still receiving spans: this trace is analyzed once")
    assert "no span has arrived for 2 s" in receiving.group(1)
    assert len(re.findall(r'data-span="[0-9a-f]{16}"', html)) == 5
    assert hex_of(0xF1) not in client.get(reverse("traces:list", args=["acme"])).content.decode()


def test_a_settled_trace_is_listed_and_says_it_may_still_change(world: Any) -> None:
    from datetime import timedelta

    from django.conf import settings
    from django.utils import timezone

    from apps.analysis.services.finalize import traces_finalize_due
    from apps.ingest.models import TraceState

    _stored_now(world, 0xF2)
    settled = timezone.now() + timedelta(seconds=settings.TRACE_SETTLE_SECONDS + 0.5)
    assert traces_finalize_due(now=settled).traces == 1
    assert Trace.objects.get().state == TraceState.SETTLED
    client = client_for(world.viewer)
    html = client.get(detail_url(hex_of(0xF2))).content.decode()
    receiving = re.search(r'data-role="receiving">([^<]*)<', html)
    assert receiving
    assert receiving.group(1).startswith("Still receiving spans: these figures are from the")
    assert "final once no span has arrived for 10 s" in receiving.group(1)
    assert "settl" not in html
    assert hex_of(0xF2) in client.get(reverse("traces:list", args=["acme"])).content.decode()


def test_span_attributes_are_listed_even_with_awkward_keys(world: Any) -> None:
    from tests.builders.ingested_traces import ingest, now_ns
    from tests.builders.spans import span

    start = now_ns()
    attributes = {"items": "not a method", "http.route": "/x"}
    ingest(
        world.team,
        [span(ROOT, None, start, start + MS, name="GET /x", attributes=attributes, trace_id=0xF2)],
    )
    # A span's attributes are in its details, opened by its link.
    url = f"{detail_url(hex_of(0xF2))}?span={ROOT:016x}"
    html = client_for(world.owner).get(url).content.decode()
    assert '<dt>items</dt><dd><span class="span-value">not a method</span></dd>' in html
    assert '<dt>http.route</dt><dd><span class="span-value">/x</span></dd>' in html


def test_a_full_trace_says_how_many_spans_it_refused(world: Any, settings: Any) -> None:
    _stored_now(world, 0xF3)
    settings.INGEST_MAX_SPANS_PER_TRACE = 1
    Trace.objects.filter(team=world.team).update(spans_dropped=42)

    html = client_for(world.viewer).get(detail_url(hex_of(0xF3))).content.decode()

    assert "42 more refused" in html
    assert "limit of spans per trace" in html


def test_a_trace_cut_at_its_byte_limit_says_so_and_how_much_it_refused(world: Any) -> None:
    _stored_now(world, 0xF4)
    Trace.objects.filter(team=world.team).update(spans_dropped=3, bytes_dropped=3 * 1024 * 1024)

    html = client_for(world.viewer).get(detail_url(hex_of(0xF4))).content.decode()

    assert "3 more refused (3.0\xa0MB)" in html
    assert "limit of bytes per trace" in html
