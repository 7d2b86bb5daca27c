"""A trace's waterfall rows are compact: a span's details open on demand, as a page of
their own without script or as a fragment htmx swaps in, and a big trace's rows come a
page at a time."""

import re

import pytest
from django.test import Client

from tests.builders.ingested_traces import Explorer
from tests.builders.spans import AUTH, LLM, RETR_A, RETR_B, ROOT
from tests.conftest import client_for
from tests.dashboards.test_trace_detail import detail_url

HTMX = {"HX-Request": "true"}


def span_url(trace_url: str, span_id: int) -> str:
    return f"{trace_url}?span={span_id:016x}"


def row_ids(html: str) -> list[int]:
    return [int(s, 16) for s in re.findall(r'<div class="wf-row[^"]*" data-span="(\w{16})"', html)]


def panel(html: str) -> str:
    found = re.search(r'<section id="span-panel"[^>]*>(.*?)</section>', html, re.S)
    assert found is not None
    return found.group(1)


def detail(html: str, term: str) -> str:
    found = re.search(rf"<dt>{re.escape(term)}</dt><dd>(.*?)</dd>", html, re.S)
    assert found is not None, term
    return re.sub(r"<[^>]+>", "", found.group(1)).strip()


def assert_works_without_script(html: str) -> None:
    assert not re.search(r"<script\b[^>]*>\s*[^<\s]", html), "inline script"
    assert not re.search(r"\son[a-z]+\s*=", html), "inline event handler"
    assert "hx-on" not in html
    links = re.findall(r"<a\b[^>]*\bhx-get=[^>]*>", html)
    assert links
    for element in links:
        href = re.search(r'\bhref="([^"]*)"', element)
        get = re.search(r'\bhx-get="([^"]*)"', element)
        assert href, element
        assert get, element
        assert href.group(1) == get.group(1), element


def test_a_row_holds_only_what_it_draws(explorer: Explorer) -> None:
    html = client_for(explorer.world.viewer).get(detail_url(explorer.ok)).content.decode()
    waterfall = html[html.index('id="waterfall"') :]
    assert "<details" not in waterfall
    assert "<dt>" not in waterfall  # no span's fields until one is asked for
    assert panel(html).strip() == ""
    for span_id in (ROOT, AUTH, RETR_A, RETR_B, LLM):
        link = f'href="?span={span_id:016x}" hx-get="?span={span_id:016x}"'
        assert link in waterfall
    assert_works_without_script(html)


def test_without_script_a_span_link_opens_the_page_with_its_details(explorer: Explorer) -> None:
    response = client_for(explorer.world.viewer).get(span_url(detail_url(explorer.ok), LLM))

    assert response.status_code == 200
    html = response.content.decode()
    details = panel(html)
    assert f'data-span-details="{LLM:016x}"' in details
    assert "chat gpt-4o" in details
    assert detail(details, "span") == f"{LLM:016x}"
    assert detail(details, "kind") == "client"
    assert detail(details, "start") == "+300 ms"
    assert detail(details, "duration") == "650 ms"
    assert detail(details, "status") == "unset"
    assert detail(details, "critical") == "650 ms on the path"
    assert detail(details, "gen_ai.operation.name") == "chat"
    # The rest of the page is all there: breakdown and every row.
    assert row_ids(html) == [ROOT, AUTH, RETR_A, RETR_B, LLM]
    assert 'id="stage-breakdown"' in html
    assert_works_without_script(html)


def test_the_details_of_a_span_off_the_critical_path_say_nothing_of_it(
    explorer: Explorer,
) -> None:
    html = (
        client_for(explorer.world.viewer)
        .get(span_url(detail_url(explorer.ok), RETR_A))
        .content.decode()
    )
    details = panel(html)
    assert detail(details, "start") == "+50 ms"
    assert "<dt>critical</dt>" not in details


def test_a_failed_span_shows_its_message_in_its_row_and_its_details(explorer: Explorer) -> None:
    client = client_for(explorer.world.viewer)
    html = client.get(detail_url(explorer.errored)).content.decode()
    row = html[html.index(f'data-span="{LLM:016x}"') :]
    row = row[: row.index('<div class="wf-ms">')]
    assert "upstream timeout" in row
    html = client.get(span_url(detail_url(explorer.errored), LLM)).content.decode()
    assert detail(panel(html), "status") == "error: upstream timeout"


def test_with_htmx_a_span_link_gets_only_its_details(explorer: Explorer) -> None:
    response = client_for(explorer.world.viewer).get(
        span_url(detail_url(explorer.ok), LLM), headers=HTMX
    )

    assert response.status_code == 200
    html = response.content.decode()
    assert html.startswith('<section id="span-panel"')
    assert "<html" not in html
    assert 'id="waterfall"' not in html
    assert detail(panel(html), "duration") == "650 ms"
    assert "HX-Request" in response["Vary"]
    assert_works_without_script(html)  # its close link too


def test_with_htmx_closing_the_details_gets_an_empty_panel(explorer: Explorer) -> None:
    html = client_for(explorer.world.viewer).get(detail_url(explorer.ok), headers=HTMX)
    assert html.status_code == 200
    assert re.fullmatch(r'<section id="span-panel"[^>]*></section>\s*', html.content.decode())


def test_a_restored_history_entry_gets_the_whole_page(explorer: Explorer) -> None:
    response = client_for(explorer.world.viewer).get(
        span_url(detail_url(explorer.ok), LLM),
        headers={**HTMX, "HX-History-Restore-Request": "true"},
    )
    html = response.content.decode()
    assert "<html" in html
    assert f'data-span-details="{LLM:016x}"' in html


@pytest.mark.parametrize("span", ["ffffffffffffffff", "zz", "", f"{LLM:015x}", "<b>x</b>"])
def test_an_unknown_span_shows_the_page_without_details(explorer: Explorer, span: str) -> None:
    client = client_for(explorer.world.viewer)
    url = f"{detail_url(explorer.ok)}?span={span}"

    response = client.get(url)

    assert response.status_code == 200
    html = response.content.decode()
    assert panel(html).strip() == ""
    assert row_ids(html) == [ROOT, AUTH, RETR_A, RETR_B, LLM]
    assert "<b>x</b>" not in html
    fragment = client.get(url, headers=HTMX)
    assert fragment.status_code == 200
    assert panel(fragment.content.decode()).strip() == ""


def test_an_upper_case_span_id_finds_the_span(explorer: Explorer) -> None:
    url = f"{detail_url(explorer.ok)}?span={LLM:016X}"
    html = client_for(explorer.world.viewer).get(url).content.decode()
    assert f'data-span-details="{LLM:016x}"' in html


@pytest.mark.parametrize("headers", [None, HTMX], ids=["page", "htmx"])
def test_another_teams_trace_is_still_a_404_with_a_span(
    explorer: Explorer, headers: dict[str, str] | None
) -> None:
    owner = client_for(explorer.world.owner)
    assert (
        owner.get(span_url(detail_url(explorer.theirs), ROOT), headers=headers).status_code == 404
    )
    outsider = client_for(explorer.world.outsider)
    for url in (
        span_url(detail_url(explorer.ok), LLM),
        span_url(detail_url(explorer.ok, "globex"), LLM),
    ):
        assert outsider.get(url, headers=headers).status_code == 404


def test_anonymous_asking_for_a_span_is_sent_to_log_in(explorer: Explorer) -> None:
    response = Client().get(span_url(detail_url(explorer.ok), LLM), headers=HTMX)
    assert response.status_code == 302


@pytest.fixture
def two_a_page(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("apps.dashboards.views.traces.ROWS_PER_PAGE", 2)


@pytest.mark.usefixtures("two_a_page")
def test_a_big_trace_shows_its_rows_a_page_at_a_time(explorer: Explorer) -> None:
    client = client_for(explorer.world.viewer)
    html = client.get(detail_url(explorer.ok)).content.decode()
    assert row_ids(html) == [ROOT, AUTH]
    assert "2 spans at a time" in html
    assert 'href="?rows=2" hx-get="?rows=2"' in html
    assert "Next 2 spans" in html
    assert_works_without_script(html)
    # The breakdown still covers every span.
    assert 'data-stage="generation"' in html

    # Without script the link is the next page, with a way back.
    html = client.get(f"{detail_url(explorer.ok)}?rows=2").content.decode()
    assert row_ids(html) == [RETR_A, RETR_B]
    assert 'href="?rows=0"' in html
    assert 'href="?rows=4" hx-get="?rows=4"' in html
    assert "Next 1 span<" in html

    # With htmx it gets the next rows and the link after them, to append.
    fragment = client.get(f"{detail_url(explorer.ok)}?rows=4", headers=HTMX).content.decode()
    assert fragment.lstrip().startswith(f'<div class="wf-row on-path" data-span="{LLM:016x}"')
    assert row_ids(fragment) == [LLM]
    assert "<html" not in fragment
    assert "?rows=" not in fragment  # the last rows: no link further


@pytest.mark.usefixtures("two_a_page")
def test_a_span_link_opens_the_page_of_rows_that_holds_it(explorer: Explorer) -> None:
    html = (
        client_for(explorer.world.viewer)
        .get(span_url(detail_url(explorer.ok), LLM))
        .content.decode()
    )
    assert row_ids(html) == [LLM]
    assert f'data-span-details="{LLM:016x}"' in panel(html)


@pytest.mark.usefixtures("two_a_page")
@pytest.mark.parametrize(
    ("rows", "first"),
    [
        ("x", ROOT),
        ("-2", ROOT),
        ("", ROOT),
        ("²", ROOT),
        ("9" * 5000, ROOT),
        ("99", LLM),
        ("3", RETR_B),
    ],
    ids=["letter", "negative", "empty", "superscript", "huge", "past-the-end", "unaligned"],
)
def test_an_odd_row_offset_shows_rows_anyway(explorer: Explorer, rows: str, first: int) -> None:
    response = client_for(explorer.world.viewer).get(f"{detail_url(explorer.ok)}?rows={rows}")
    assert response.status_code == 200
    assert row_ids(response.content.decode())[0] == first


@pytest.mark.usefixtures("two_a_page")
def test_the_pages_of_rows_stop_at_the_waterfalls_limit(
    explorer: Explorer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("apps.dashboards.views.traces.MAX_WATERFALL_SPANS", 4)
    client = client_for(explorer.world.viewer)
    html = client.get(detail_url(explorer.ok)).content.decode()
    assert "Showing the first 4 of 5 spans" in html
    assert 'href="?rows=2"' in html
    html = client.get(f"{detail_url(explorer.ok)}?rows=2").content.decode()
    assert row_ids(html) == [RETR_A, RETR_B]
    assert "Showing the first 4 of 5 spans" in html
    assert 'href="?rows=4"' not in html
    # A span past the limit has no row, so no details either.
    html = client.get(span_url(detail_url(explorer.ok), LLM)).content.decode()
    assert panel(html).strip() == ""
