"""The stage editor's degrade form: the run-time client's levers for one stage."""

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from apps.pipelines.models import Pipeline, Stage
from tests.builders.configuration import make_pipeline, make_stage
from tests.conftest import TeamWorld, client_for

pytestmark = pytest.mark.django_db
HTMX = {"HX-Request": "true"}
ALL_LEVERS = ["skip", "fallback", "hedge", "cap"]
POLICY = {"levers": ["skip", "cap"], "cap_ms": 250}


@pytest.fixture
def pipeline(world: TeamWorld) -> Pipeline:
    pipeline = make_pipeline(world.team, "rag-chat", budget={"p95": 2000})
    make_stage(pipeline, "retrieval", name="Retrieval", budget_ms=400)
    make_stage(pipeline, "rerank", name="Rerank", budget_ms=200, degrade=POLICY)
    return pipeline


@pytest.fixture
def rerank(pipeline: Pipeline) -> Stage:
    return pipeline.stages.get(slug="rerank")


def degrade_url(stage: Stage) -> str:
    pipeline = stage.pipeline
    return reverse(
        "pipelines:stage_degrade",
        kwargs={
            "team_slug": pipeline.team.slug,
            "pipeline_slug": pipeline.slug,
            "stage_id": stage.id,
        },
    )


def detail_url(pipeline: Pipeline) -> str:
    return reverse(
        "pipelines:detail", kwargs={"team_slug": pipeline.team.slug, "pipeline_slug": pipeline.slug}
    )


def stage_page_url(stage: Stage) -> str:
    return (
        f"/teams/{stage.pipeline.team.slug}/dashboards/{stage.pipeline.slug}/stages/{stage.slug}/"
    )


def form_data(**overrides: Any) -> dict[str, Any]:
    """The form as a browser sends it untouched for a stage without a policy."""
    data: dict[str, Any] = {
        "levers_mode": "all",
        "levers": ALL_LEVERS,
        "first_token_ms": "",
        "hedge_after": "",
        "hedge_after_ms": "",
        "cap_ms": "",
    }
    data.update(overrides)
    return data


def degrade_of(stage: Stage) -> dict[str, Any]:
    stage.refresh_from_db()
    return stage.degrade


def editor_line(html: str, stage: Stage) -> str:
    return html.split(f'id="degrade-{stage.id}"')[1].split("</p>")[0]


# --- set and clear ---------------------------------------------------------------


@pytest.mark.parametrize("role", ["owner", "editor"])
def test_writers_set_a_policy_and_get_the_editor_back(
    world: TeamWorld, rerank: Stage, role: str
) -> None:
    response = client_for(getattr(world, role)).post(
        degrade_url(rerank),
        form_data(
            levers_mode="chosen",
            levers=["fallback", "skip"],
            first_token_ms="800",
            hedge_after="p99",
            cap_ms=" 300 ",
        ),
        headers=HTMX,
    )
    assert response.status_code == 200
    assert response["HX-Retarget"] == "#stage-editor"
    assert response["HX-Reswap"] == "outerHTML"
    assert degrade_of(rerank) == {
        "levers": ["skip", "fallback"],
        "first_token_ms": 800,
        "hedge_after": "p99",
        "cap_ms": 300,
    }
    assert "levers skip, fallback; first token 800 ms; hedge after p99; cap 300 ms" in (
        editor_line(response.content.decode(), rerank)
    )


@pytest.mark.parametrize("role", ["owner", "editor"])
def test_writers_clear_a_policy_back_to_every_lever(
    world: TeamWorld, rerank: Stage, role: str
) -> None:
    response = client_for(getattr(world, role)).post(degrade_url(rerank), form_data(), headers=HTMX)
    assert response.status_code == 200
    assert degrade_of(rerank) == {}
    assert "every lever, with the stage" in editor_line(response.content.decode(), rerank)


def test_no_lever_ticked_under_only_these_means_none_acts(world: TeamWorld, rerank: Stage) -> None:
    response = client_for(world.owner).post(
        degrade_url(rerank), form_data(levers_mode="chosen", levers=[]), headers=HTMX
    )
    assert response.status_code == 200
    assert degrade_of(rerank) == {"levers": []}
    assert "levers none" in editor_line(response.content.decode(), rerank)


def test_settings_without_a_lever_list_leave_every_lever_acting(
    world: TeamWorld, rerank: Stage
) -> None:
    response = client_for(world.owner).post(
        degrade_url(rerank), form_data(first_token_ms="1200"), headers=HTMX
    )
    assert degrade_of(rerank) == {"first_token_ms": 1200}
    assert "every lever; first token 1200 ms" in editor_line(response.content.decode(), rerank)


@pytest.mark.parametrize("select", ["ms", ""])
def test_a_hedge_after_a_fixed_time_is_stored_in_milliseconds(
    world: TeamWorld, rerank: Stage, select: str
) -> None:
    client_for(world.owner).post(
        degrade_url(rerank), form_data(hedge_after=select, hedge_after_ms="450"), headers=HTMX
    )
    assert degrade_of(rerank) == {"hedge_after": 450}


def test_the_form_shows_the_stored_policy(world: TeamWorld, pipeline: Pipeline) -> None:
    stage = make_stage(
        pipeline, "generation", degrade={"levers": ["hedge"], "hedge_after": 700, "cap_ms": 90}
    )
    response = client_for(world.editor).get(degrade_url(stage), headers=HTMX)
    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith('<form class="rule-form degrade-form"')
    assert 'value="chosen" id="id_levers_mode_1" required checked' in html
    assert 'value="hedge" id="id_levers_2" checked' in html
    assert 'value="skip" id="id_levers_0">' in html
    assert '<option value="ms" selected>' in html
    assert 'name="hedge_after_ms" value="700"' in html
    assert 'name="cap_ms" value="90"' in html
    assert "within the document's refresh time (30 s)" in html


def test_without_a_policy_the_form_says_every_lever_with_every_box_ticked(
    world: TeamWorld, pipeline: Pipeline
) -> None:
    html = (
        client_for(world.owner)
        .get(degrade_url(pipeline.stages.get(slug="retrieval")), headers=HTMX)
        .content.decode()
    )
    assert 'value="all" id="id_levers_mode_0" required checked' in html
    assert all(
        f'value="{lever}" id="id_levers_{n}" checked' in html for n, lever in enumerate(ALL_LEVERS)
    )


def test_without_htmx_the_form_is_a_page_and_saving_returns_to_the_pipeline(
    world: TeamWorld, rerank: Stage
) -> None:
    client = client_for(world.owner)
    page = client.get(degrade_url(rerank))
    assert page.status_code == 200
    assert "<html" in page.content.decode()
    response = client.post(degrade_url(rerank), form_data(cap_ms="120"))
    assert response.status_code == 302
    assert response["Location"] == detail_url(rerank.pipeline)
    assert degrade_of(rerank) == {"cap_ms": 120}


# --- malformed input ---------------------------------------------------------------

MS_BOUNDS = "whole milliseconds from 1 to 600000"


@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        ({"first_token_ms": "abc"}, "first_token_ms", f"first_token_ms: {MS_BOUNDS}"),
        ({"first_token_ms": "0"}, "first_token_ms", f"first_token_ms: {MS_BOUNDS}"),
        ({"first_token_ms": "1.5"}, "first_token_ms", f"first_token_ms: {MS_BOUNDS}"),
        ({"first_token_ms": "-20"}, "first_token_ms", f"first_token_ms: {MS_BOUNDS}"),
        ({"cap_ms": "600001"}, "cap_ms", f"cap_ms: {MS_BOUNDS}"),
        ({"cap_ms": "99999999999999999999"}, "cap_ms", f"cap_ms: {MS_BOUNDS}"),
        ({"cap_ms": "9" * 5000}, "cap_ms", "at most 20 characters"),
        ({"hedge_after": "p42"}, "hedge_after", "hedge_after: one of p50, p95, p99"),
        ({"hedge_after": "p" * 5000}, "hedge_after", "hedge_after: one of p50, p95, p99"),
        (
            {"hedge_after": "ms", "hedge_after_ms": "0"},
            "hedge_after_ms",
            f"hedge_after: {MS_BOUNDS}",
        ),
        (
            {"hedge_after": "ms", "hedge_after_ms": ""},
            "hedge_after_ms",
            f"hedge_after: {MS_BOUNDS}",
        ),
        (
            {"hedge_after": "ms", "hedge_after_ms": "soon"},
            "hedge_after_ms",
            "hedge_after: one of p50, p95, p99, or milliseconds.",
        ),
        (
            {"hedge_after": "p95", "hedge_after_ms": "300"},
            "hedge_after_ms",
            "Choose “a fixed time”",
        ),
        (
            {"levers_mode": "chosen", "levers": ["skip", "teleport"]},
            "levers",
            "levers: no lever teleport; use skip, fallback, hedge, cap.",
        ),
        (
            {"levers_mode": "chosen", "levers": ["x" * 5000]},
            "levers",
            "levers: no lever " + "x" * 40 + ";",
        ),
        ({"levers": ["skip"]}, "levers", "choose “Only the levers ticked”"),
        ({"levers_mode": "some"}, "levers_mode", "Select a valid choice"),
    ],
)
def test_malformed_input_comes_back_in_the_form_and_changes_nothing(
    world: TeamWorld, rerank: Stage, overrides: dict[str, Any], field: str, message: str
) -> None:
    response = client_for(world.owner).post(
        degrade_url(rerank), form_data(**overrides), headers=HTMX
    )
    html = response.content.decode()
    assert response.status_code == 422
    assert html.lstrip().startswith('<form class="rule-form degrade-form"')
    errors = html.split(f'id="id_{field}_error"')[1].split("</ul>")[0]
    assert message in errors
    assert "x" * 41 not in html  # an oversized name is cut short in its message
    assert degrade_of(rerank) == POLICY


def test_malformed_input_without_htmx_gets_a_full_page_with_the_form(
    world: TeamWorld, rerank: Stage
) -> None:
    response = client_for(world.owner).post(degrade_url(rerank), form_data(cap_ms="lots"))
    html = response.content.decode()
    assert response.status_code == 422
    assert "<html" in html
    assert f"cap_ms: {MS_BOUNDS}" in html
    assert degrade_of(rerank) == POLICY


# --- who may ------------------------------------------------------------------------


def test_viewer_sees_the_policy_but_no_way_to_change_it(world: TeamWorld, rerank: Stage) -> None:
    html = client_for(world.viewer).get(detail_url(rerank.pipeline)).content.decode()
    line = editor_line(html, rerank)
    assert "levers skip, cap; cap 250 ms" in line
    assert degrade_url(rerank) not in html


def test_viewer_gets_403_on_the_degrade_form(world: TeamWorld, rerank: Stage) -> None:
    client = client_for(world.viewer)
    assert client.get(degrade_url(rerank), headers=HTMX).status_code == 403
    response = client.post(degrade_url(rerank), form_data(), headers=HTMX)
    assert response.status_code == 403
    assert degrade_of(rerank) == POLICY


def test_outsider_gets_404_on_the_degrade_form(world: TeamWorld, rerank: Stage) -> None:
    client = client_for(world.outsider)
    assert client.get(degrade_url(rerank)).status_code == 404
    assert client.post(degrade_url(rerank), form_data()).status_code == 404
    assert degrade_of(rerank) == POLICY


def test_another_teams_stage_under_our_pipeline_is_404(
    world: TeamWorld, pipeline: Pipeline
) -> None:
    foreign = make_stage(make_pipeline(world.other_team, "globex-chat"), "secret", degrade=POLICY)
    url = reverse(
        "pipelines:stage_degrade",
        kwargs={"team_slug": "acme", "pipeline_slug": pipeline.slug, "stage_id": foreign.id},
    )
    response = client_for(world.owner).post(url, form_data())
    assert response.status_code == 404
    assert degrade_of(foreign) == POLICY


def test_anonymous_is_sent_to_login(world: TeamWorld, rerank: Stage) -> None:
    response = Client().post(degrade_url(rerank), form_data())
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))
    assert degrade_of(rerank) == POLICY


# --- the stage's dashboard page ---------------------------------------------------------


def test_the_stage_page_shows_the_policy_with_a_link_to_change_it(
    world: TeamWorld, rerank: Stage
) -> None:
    html = client_for(world.editor).get(stage_page_url(rerank)).content.decode()
    line = html.split('data-role="degrade-policy"')[1].split("</p>")[0]
    assert "levers skip, cap; cap 250 ms" in line
    assert f'href="{degrade_url(rerank)}"' in line


def test_the_stage_page_shows_a_viewer_the_policy_and_the_editor(
    world: TeamWorld, rerank: Stage
) -> None:
    html = client_for(world.viewer).get(stage_page_url(rerank)).content.decode()
    line = html.split('data-role="degrade-policy"')[1].split("</p>")[0]
    assert "levers skip, cap; cap 250 ms" in line
    assert degrade_url(rerank) not in html
    assert f"{detail_url(rerank.pipeline)}#stage-{rerank.pk}" in line
