"""A span's details panel reads that one span's attributes and events, by a request of
its own: every member sees them, a long value cut with its length stated; an outsider
and another team's span get nothing."""

import re
from html import unescape

import pytest

from tests.builders.ingested_traces import GLOBEX_SPAN, TOOL, Detailed, build_detailed
from tests.builders.spans import LLM
from tests.conftest import TeamWorld, client_for
from tests.dashboards.test_trace_detail import detail_url
from tests.dashboards.test_trace_detail_spans import HTMX, assert_works_without_script, panel

MEMBERS = ["owner", "editor", "viewer"]


@pytest.fixture
def detailed(world: TeamWorld) -> Detailed:
    return build_detailed(world)


def panel_url(detailed: Detailed, span_id: int, trace_hex: str | None = None) -> str:
    return f"{detail_url(trace_hex or detailed.trace_hex)}?span={span_id:016x}"


def text(html: str) -> str:
    return unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).strip())


@pytest.mark.parametrize("role", MEMBERS)
def test_every_member_sees_a_spans_attributes_and_events_in_its_panel(
    detailed: Detailed, role: str
) -> None:
    response = client_for(getattr(detailed.world, role)).get(panel_url(detailed, LLM), headers=HTMX)

    assert response.status_code == 200
    html = response.content.decode()
    assert html.startswith('<section id="span-panel"')
    shown = text(panel(html))
    assert "gen_ai.operation.name chat" in shown
    assert "first_token +200 ms after the span's start" in shown
    assert_works_without_script(html)


def test_a_long_value_is_cut_and_says_its_full_length(detailed: Detailed) -> None:
    html = client_for(detailed.world.viewer).get(panel_url(detailed, TOOL)).content.decode()

    details = panel(html)
    assert detailed.long_value[:2000] in details
    assert detailed.long_value[:2001] not in details
    notes = re.findall(r'data-role="cut">([^<]*)<', details)
    # The span's own value, and the event's.
    assert notes == ["… cut: the first 2000 of 6,000 characters"] * 2
    shown = text(details)
    assert 'tool.args ["a", "b"]' in shown
    assert "tool.retries 2" in shown
    assert "retry +10 ms after the span's start payload 00000 00001" in shown
    assert "reason timeout" in shown


def test_past_the_most_entries_the_panel_says_how_many_it_lists(
    detailed: Detailed, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("apps.ingest.selectors.span_details.MAX_SHOWN_VALUES", 2)
    html = client_for(detailed.world.viewer).get(panel_url(detailed, TOOL)).content.decode()
    assert "Listing the first 2 of this span's 5 attributes and events." in text(panel(html))


@pytest.mark.parametrize("headers", [None, HTMX], ids=["page", "fragment"])
def test_an_outsider_gets_404_for_the_panel(detailed: Detailed, headers: dict | None) -> None:
    response = client_for(detailed.world.outsider).get(panel_url(detailed, LLM), headers=headers)
    assert response.status_code == 404


@pytest.mark.parametrize("headers", [None, HTMX], ids=["page", "fragment"])
def test_another_teams_span_is_a_404_or_shows_nothing_of_it(
    detailed: Detailed, headers: dict | None
) -> None:
    owner = client_for(detailed.world.owner)
    # globex's trace under acme is a 404, its span with it.
    theirs = panel_url(detailed, GLOBEX_SPAN, trace_hex=detailed.theirs_hex)
    assert owner.get(theirs, headers=headers).status_code == 404
    # globex's span id in acme's trace: no such span here, so no details.
    response = owner.get(panel_url(detailed, GLOBEX_SPAN), headers=headers)
    assert response.status_code == 200
    html = response.content.decode()
    assert panel(html).strip() == ""
    assert "only globex" not in html
