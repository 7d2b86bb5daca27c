"""The what-if page: a scenario in its URL, before and after, levers, saved scenarios."""

import re
from html import unescape
from urllib.parse import parse_qs, urlsplit

import pytest
from django.test import Client

from apps.whatif.models import SavedScenario, WhatIfRun
from apps.whatif.services import whatif_run_compute
from tests.conftest import client_for
from tests.whatif.conftest import Chat

pytestmark = pytest.mark.django_db(transaction=True)

PAGE = "/teams/acme/dashboards/rag-chat/whatif/"
HTMX = {"HX-Request": "true"}


def changes_of(url: str) -> list[str]:
    return parse_qs(urlsplit(url).query).get("change", [])


def test_the_page_shows_before_and_after_and_the_levers(chat: Chat, eager: None) -> None:
    response = client_for(chat.world.viewer).get(
        PAGE, {"window": "1h", "p": "p95", "change": ["generation:scale:0.8", "rerank:remove"]}
    )

    assert response.status_code == 200
    html = response.content.decode()
    assert "Generation \u00d7 0.8" in html
    assert "Rerank removed" in html
    assert 'data-role="saving"' in html
    assert html.count('<tr data-stage="') == 9 + 8  # the stage table and the sensitivity
    # The levers are found on top of the scenario: none touches the removed Rerank, and
    # trying one keeps the scenario's changes.
    levers = html.split('<table class="levers">')[1].split("</table>")[0]
    sensitivity = html.split('<table class="sensitivity">')[1].split("</table>")[0]
    titles = re.findall(r"<strong>(.*?)</strong>", levers)
    assert titles
    assert not [title for title in titles if "Rerank" in title]
    assert not re.search(r'data-lever="\w+-rerank"', levers)
    assert 'data-stage="rerank"' not in sensitivity
    tries = re.findall(r'<a href="([^"]+)"[^>]*>Try it', levers)
    assert tries
    for url in tries:
        assert changes_of(unescape(url))[:2] == ["generation:scale:0.8", "rerank:remove"]
    assert "Which stage's milliseconds reach the p95" in html
    assert "Try it" in html
    assert "300 traces replayed of 300" in html
    # A viewer may try scenarios, not save them.
    assert "Save these changes" not in html
    assert "owners and editors save them" in html


def test_adding_a_change_leads_to_the_scenario_s_own_address(chat: Chat, eager: None) -> None:
    client = client_for(chat.world.owner)
    response = client.get(
        PAGE,
        {"window": "15m", "p": "p99", "change": "rerank:remove", "stage": "retrieval",
         "op": "cache", "amount": "0.4", "hit_ms": "20"},
    )  # fmt: skip

    assert response.status_code == 302
    assert changes_of(response["Location"]) == ["rerank:remove", "retrieval:cache:0.4:20"]
    assert parse_qs(urlsplit(response["Location"]).query)["window"] == ["15m"]


def test_with_htmx_a_change_swaps_the_panel_and_pushes_its_address(chat: Chat, eager: None) -> None:
    response = client_for(chat.world.owner).get(
        PAGE, {"stage": "history", "op": "parallel", "other": "rewrite"}, headers=HTMX
    )

    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith('<section class="card whatif" id="whatif"')
    assert "<html" not in html
    assert changes_of(response["HX-Push-Url"]) == ["history:parallel:rewrite"]
    assert "History concurrent with Rewrite" in html


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"stage": "rerank", "op": "scale"}, "Give the factor"),
        ({"stage": "rerank", "op": "cache", "amount": "0.5"}, "hit ratio"),
        ({"stage": "rerank", "op": "parallel"}, "another stage"),
        ({"stage": "nope", "op": "remove"}, "Select a valid choice"),
        ({"change": "rerank:explode"}, "write it as stage:op"),
        ({"change": "ghost:remove"}, "one of this pipeline"),
    ],
)
def test_a_change_that_makes_no_sense_is_explained_on_the_page(
    chat: Chat, eager: None, query: dict[str, str], message: str
) -> None:
    response = client_for(chat.world.owner).get(PAGE, query)

    assert response.status_code == 200
    assert message in response.content.decode().replace("&#x27;", "'")


def test_an_outsider_gets_404(chat: Chat) -> None:
    assert client_for(chat.world.outsider).get(PAGE).status_code == 404
    assert Client().get(PAGE).status_code == 302  # to the sign-in page


def test_a_page_asked_before_the_worker_answers_polls_until_it_does(chat: Chat) -> None:
    response = client_for(chat.world.owner).get(PAGE, {"change": "rerank:remove"})

    html = response.content.decode()
    assert 'data-role="pending"' in html
    section = re.search(r'<section class="card whatif"[^>]*>', html)
    assert section
    assert 'hx-trigger="load delay:1s"' in section.group(0)
    assert "change=rerank%3Aremove" in section.group(0)
    assert "run=" in section.group(0)  # it polls for its own runs, not new ones


def test_writers_save_and_delete_scenarios_and_viewers_cannot(chat: Chat, eager: None) -> None:
    body = {"name": "cheaper answer", "window": "1h", "p": "p95",
            "change": ["rerank:remove", "generation:scale:0.8"]}  # fmt: skip
    viewer = client_for(chat.world.viewer)
    assert viewer.post(PAGE + "save/", body).status_code == 403
    assert client_for(chat.world.outsider).post(PAGE + "save/", body).status_code == 404

    saved = client_for(chat.world.editor).post(PAGE + "save/", body)

    scenario = SavedScenario.objects.get()
    assert saved.status_code == 302
    assert f"scenario={scenario.pk}" in saved["Location"]
    assert [c["op"] for c in scenario.changes] == ["remove", "scale"]
    opened = viewer.get(saved["Location"]).content.decode()
    assert "Rerank removed" in opened
    assert "cheaper answer" in opened
    delete = f"{PAGE}scenarios/{scenario.pk}/delete/"
    assert viewer.post(delete).status_code == 403
    assert client_for(chat.world.owner).post(delete).status_code == 302
    assert not SavedScenario.objects.exists()


def test_a_scenario_of_another_team_cannot_be_opened(chat: Chat, eager: None) -> None:
    theirs = SavedScenario.objects.create(pipeline=chat.theirs, name="x", changes=[])
    response = client_for(chat.world.owner).get(PAGE, {"scenario": theirs.pk})
    assert response.status_code == 404


def test_the_pipeline_dashboard_loads_the_panel_with_its_window(chat: Chat) -> None:
    html = (
        client_for(chat.world.owner)
        .get("/teams/acme/dashboards/rag-chat/", {"window": "6h"})
        .content.decode()
    )
    panel = re.search(r'<section class="card" id="whatif"[^>]*>', html)
    assert panel
    assert "whatif/?window=6h&amp;p=p95" in panel.group(0)


def test_polling_reads_the_page_s_own_runs_and_asks_nothing_new(chat: Chat) -> None:
    client = client_for(chat.world.owner)
    first = client.get(PAGE, {"change": "rerank:remove"}).content.decode()
    poll = re.search(r'hx-get="([^"]*run=[^"]*)"', first)
    assert poll
    url = poll.group(1).replace("&amp;", "&")
    for run in WhatIfRun.objects.all():
        whatif_run_compute(run_id=run.pk)

    polled = client.get(url, headers=HTMX).content.decode()

    assert WhatIfRun.objects.count() == 2
    assert 'data-role="saving"' in polled
    assert 'hx-trigger="load delay' not in polled
    # Another team's member cannot read these runs through the page either.
    theirs = client_for(chat.world.outsider).get(url.replace("/acme/", "/globex/"))
    assert theirs.status_code == 404
