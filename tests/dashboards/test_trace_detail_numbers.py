"""A trace whose LLM span carried a time to first chunk no span could hold: dropped on
arrival and noted on the span, or stored raw before ingestion checked it."""

import html
import json
import re
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from apps.analysis.services.finalize import traces_finalize_due
from apps.ingest.models import Trace, TraceState
from apps.ingest.services.batches import raw_batches_drain
from tests.builders.ingested_traces import hex_of, ingest, make_rag_pipeline, now_ns
from tests.builders.spans import LLM, ROOT, EventSpec, HandSpan, span
from tests.builders.stored_spans import spans_store_unchecked
from tests.conftest import TeamWorld, client_for
from tests.dashboards.test_trace_detail import cell, detail_url
from tests.timing import HOUR, MS

TTFC = "gen_ai.response.time_to_first_chunk"
TRACE = 0xE1


def chat_trace(t0: int, ttfc: Any, *, first_token_event: bool) -> list[HandSpan]:
    """Root 0-1000 ms and an LLM call 300-950 ms, its first token event (if any) at 500 ms."""
    events: list[EventSpec] = [("first_token", t0 + 500 * MS)] if first_token_event else []
    return [
        span(ROOT, None, t0, t0 + 1000 * MS, name="POST /chat", kind="server", trace_id=TRACE),
        span(LLM, ROOT, t0 + 300 * MS, t0 + 950 * MS, name="chat gpt-4o", kind="client",
             attributes={"gen_ai.operation.name": "chat", TTFC: ttfc}, events=events,
             trace_id=TRACE),
    ]  # fmt: skip


def llm_details(page: str) -> str:
    panel = page[page.index(f'data-span-details="{LLM:016x}"') :]
    return panel[: panel.index("</dl>")]


def llm_page(world: TeamWorld) -> str:
    """The trace's page with the LLM span's details open."""
    response = client_for(world.viewer).get(f"{detail_url(hex_of(TRACE))}?span={LLM:016x}")
    assert response.status_code == 200
    return response.content.decode()


def test_a_span_that_lost_its_time_to_first_chunk_on_arrival_shows_the_note(
    world: TeamWorld,
) -> None:
    make_rag_pipeline(world.team)
    ingest(world.team, chat_trace(now_ns() - HOUR, 1e300, first_token_event=True))

    page = llm_page(world)

    details = llm_details(page)
    assert f"<dt>{TTFC}</dt>" not in details
    dropped = re.search(r'data-role="dropped-attributes">(.*?)</dd>', details, re.S)
    assert dropped is not None
    assert html.unescape(dropped.group(1)) == f"{TTFC}: out of range (1e+300)"
    # The first token event stands in: 200 ms to the first token, 450 ms after it.
    assert cell(page, "ttft", "wall") == "200 ms"
    assert cell(page, "generation", "wall") == "450 ms"


@pytest.mark.parametrize("stored", [1e300, "1e300", 10**400], ids=["1e300", "'1e300'", "10**400"])
def test_a_span_stored_with_an_unusable_time_to_first_chunk_is_analyzed_and_shown(
    world: TeamWorld, stored: Any
) -> None:
    make_rag_pipeline(world.team)
    spans = chat_trace(now_ns() - HOUR, 0.2, first_token_event=False)
    # As a row stored before ingestion checked the value would hold it.
    unchecked = json.dumps({"gen_ai.operation.name": "chat", TTFC: stored})
    spans_store_unchecked(world.team, spans, {"chat gpt-4o": unchecked})
    raw_batches_drain()

    result = traces_finalize_due(now=timezone.now() + timedelta(hours=1))

    assert (result.traces, result.quarantined) == (1, 0)
    assert Trace.objects.get().state == TraceState.FINALIZED
    page = llm_page(world)
    assert "ignored: not a usable number of seconds" in llm_details(page)
    # No first token: the until-first-token stage takes the whole call.
    assert cell(page, "ttft", "wall") == "650 ms"
    assert cell(page, "generation", "wall") == "0 ms"
    api = client_for(world.viewer).get(f"/api/v1/traces/{hex_of(TRACE)}/")
    assert api.status_code == 200
