"""The pipeline page's recompute panel and the note over figures that predate the rules."""

import re
from html import unescape

import numpy as np
import pytest
from django.test import Client

from apps.analysis.models import Recompute
from apps.analysis.services.recompute import recompute_request, recompute_step
from tests.builders.configuration import make_pipeline
from tests.builders.recompute_traces import (
    ChatPipeline,
    chat_pipeline,
    chat_traces,
    rollups_settle,
    rules_b,
    send,
    stored_samples,
)
from tests.conftest import TeamWorld, client_for

PAGE = "/teams/acme/dashboards/rag-chat/"
STAGE = PAGE + "stages/rerank/"
PANEL = PAGE + "recompute/"
START = PAGE + "recompute/start/"
HTMX = {"HX-Request": "true"}
MEMBERS = ["owner", "editor", "viewer"]


@pytest.fixture
def chat(world: TeamWorld) -> ChatPipeline:
    """Six traces of the last hour analysed under rules A."""
    chat = chat_pipeline(world.team)
    rng = np.random.default_rng(5)
    send(world.team, chat_traces(rng, count=6, first_id=1, minutes_ago=(40, 5)))
    return chat


def text(response: object) -> str:
    html = response.content.decode()  # type: ignore[attr-defined]
    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", html)))


def panel_of(html: str) -> str:
    found = re.search(r'<section class="card recompute" id="recompute".*?</section>', html, re.S)
    assert found
    return found.group(0)


@pytest.mark.parametrize("role", MEMBERS)
def test_after_a_rule_change_every_member_is_told_the_figures_predate_it(
    world: TeamWorld, chat: ChatPipeline, role: str
) -> None:
    client = client_for(getattr(world, role))
    assert "earlier rules" not in text(client.get(PAGE))
    rules_b(chat)
    chat.pipeline.refresh_from_db()
    changed = chat.pipeline.rules_changed_at
    assert changed is not None

    page = client.get(PAGE).content.decode()
    stage = client.get(STAGE).content.decode()

    moment = f"{changed:%H:%M} UTC"
    assert 'data-role="earlier-rules"' in page
    assert f"Figures before {moment} were computed with the earlier rules" in text_of(page)
    assert 'href="#recompute"' in page
    assert f"Figures before {moment} were computed with the earlier rules" in text_of(stage)
    assert 'href="/teams/acme/dashboards/rag-chat/#recompute"' in stage


def text_of(html: str) -> str:
    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", html)))


@pytest.mark.parametrize(("role", "form"), [("owner", True), ("editor", True), ("viewer", False)])
def test_writers_get_the_form_and_viewers_the_progress(
    world: TeamWorld, chat: ChatPipeline, role: str, form: bool
) -> None:
    client = client_for(getattr(world, role))
    start_form = 'action="/teams/acme/dashboards/rag-chat/recompute/start/"'
    idle = panel_of(client.get(PAGE).content.decode())
    run = recompute_request(pipeline=chat.pipeline, hours=3, user=world.owner).run

    running = panel_of(client.get(PAGE).content.decode())
    recompute_step(run_id=run.pk)
    rebuilding = panel_of(client.get(PAGE).content.decode())
    rollups_settle()
    finished = panel_of(client.get(PAGE).content.decode())

    assert (start_form in idle, start_form in running, start_form in finished) == (
        form, False, form,
    )  # fmt: skip
    assert ("Editors and owners can start a recompute" in idle) is not form
    assert ("once this one has finished" in running) is form
    assert 'data-status="queued"' in running
    assert f'hx-get="{PANEL}"' in running  # polls while it is in flight
    # Done with the traces, it polls on while the rollups of the window are rebuilt.
    assert f'hx-get="{PANEL}"' in rebuilding
    assert "still to rebuild" in text_of(rebuilding)
    assert f'hx-get="{PANEL}"' not in finished
    assert "the last 3 hours" in text_of(running)
    assert "asked by olivia" in text_of(running)
    assert "6 of 6 traces" in text_of(finished)


def test_an_editor_starts_one_and_the_panel_follows_it_to_the_end(
    world: TeamWorld, chat: ChatPipeline
) -> None:
    rules_b(chat)
    client = client_for(world.editor)

    started = client.post(START, {"hours": "1"}, headers=HTMX)

    assert started.status_code == 200
    assert "Recompute queued" in text(started)
    run = Recompute.objects.get()
    assert (run.hours, run.requested_by) == (1, world.editor)
    recompute_step(run_id=run.pk)
    polled = client.get(PANEL, headers=HTMX)
    panel = polled.content.decode()
    assert polled.status_code == 200
    assert "<html" not in panel
    assert 'data-status="finished"' in panel
    assert "6 of 6 traces" in text_of(panel)
    assert '<progress max="100" value="100"' in panel
    assert stored_samples(chat.pipeline)  # rules B now
    # The hour's figures are the current rules': no note over them any more.
    assert 'data-role="earlier-rules"' not in client.get(PAGE, {"window": "1h"}).content.decode()


def test_without_javascript_a_start_redirects_to_the_panel_with_a_message(
    world: TeamWorld, chat: ChatPipeline
) -> None:
    client = client_for(world.owner)
    response = client.post(START, {"hours": "3"})
    assert response.status_code == 302
    assert response["Location"] == PAGE + "#recompute"
    assert "Recompute queued" in text(client.get(PAGE))
    assert client.get(PANEL).status_code == 302


@pytest.mark.parametrize("hours", ["", "abc", "2", "25", "9999", "1.5", "-1", "1" * 5000])
def test_hours_not_offered_are_refused_in_place(
    world: TeamWorld, chat: ChatPipeline, hours: str
) -> None:
    response = client_for(world.owner).post(START, {"hours": hours}, headers=HTMX)
    assert response.status_code == 200
    assert 'class="errorlist"' in response.content.decode()
    assert not Recompute.objects.exists()


def test_a_second_recompute_of_the_account_is_refused_with_what_runs(
    world: TeamWorld, chat: ChatPipeline
) -> None:
    recompute_request(pipeline=make_pipeline(world.team, "agent", name="Agent"), hours=1, user=None)

    response = client_for(world.owner).post(START, {"hours": "1"}, headers=HTMX)

    assert response.status_code == 200
    assert "refused" in response.content.decode()
    assert "“Agent” is being recomputed" in text(response)
    assert Recompute.objects.count() == 1


def test_a_viewer_cannot_start_one(world: TeamWorld, chat: ChatPipeline) -> None:
    response = client_for(world.viewer).post(START, {"hours": "1"}, headers=HTMX)
    assert response.status_code == 403
    assert not Recompute.objects.exists()


def test_an_outsider_gets_404_and_a_stranger_the_sign_in_page(
    world: TeamWorld, chat: ChatPipeline
) -> None:
    chat_pipeline(world.other_team)  # globex has a rag-chat of its own
    outsider = client_for(world.outsider)
    for url in (PAGE, PANEL):
        assert outsider.get(url, headers=HTMX).status_code == 404
    assert outsider.post(START, {"hours": "1"}, headers=HTMX).status_code == 404
    assert Client().post(START, {"hours": "1"}).status_code == 302
    assert not Recompute.objects.exists()
