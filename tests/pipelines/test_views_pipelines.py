from decimal import Decimal
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from apps.pipelines.models import Pipeline
from tests.builders.configuration import make_pipeline, make_stage
from tests.conftest import TeamWorld, client_for

pytestmark = pytest.mark.django_db
WRITERS = ["owner", "editor"]
MEMBERS = ["owner", "editor", "viewer"]


def list_url(team_slug: str = "acme") -> str:
    return reverse("pipelines:list", kwargs={"team_slug": team_slug})


def create_url(team_slug: str = "acme") -> str:
    return reverse("pipelines:create", kwargs={"team_slug": team_slug})


def pipeline_url(name: str, pipeline: Pipeline) -> str:
    return reverse(
        f"pipelines:{name}",
        kwargs={"team_slug": pipeline.team.slug, "pipeline_slug": pipeline.slug},
    )


def valid_data(**overrides: Any) -> dict[str, Any]:
    data = {
        "preset": "blank",
        "name": "Support answer",
        "slug": "support-answer",
        "description": "",
        "match_service": "support-api",
        "match_root_span": "POST /answer*",
        "match_attributes": "",
        "budget_p50_ms": "",
        "budget_p90_ms": "",
        "budget_p95_ms": "2500",
        "budget_p99_ms": "",
        "objective_target": "",
        "objective_threshold_ms": "",
    }
    data.update(overrides)
    return data


@pytest.fixture
def pipeline(world: TeamWorld) -> Pipeline:
    pipeline = make_pipeline(
        world.team, "rag-chat", name="RAG chat", objective_target=99, objective_threshold_ms=4000
    )
    make_stage(pipeline, "retrieval", budget_ms=400)
    return pipeline


# --- list ---------------------------------------------------------------------


@pytest.mark.parametrize("role", MEMBERS)
def test_members_see_the_pipeline_list_with_budget_objective_and_stage_count(
    world: TeamWorld, pipeline: Pipeline, role: str
) -> None:
    response = client_for(getattr(world, role)).get(list_url())
    assert response.status_code == 200
    html = response.content.decode()
    assert "RAG chat" in html
    assert "rag-chat" in html
    assert "p95 2.5 s" in html
    assert "99% under 4 s" in html
    assert "<td>1</td>" in html


def test_viewer_sees_no_create_or_edit_controls_on_the_list(
    world: TeamWorld, pipeline: Pipeline
) -> None:
    html = client_for(world.viewer).get(list_url()).content.decode()
    assert create_url() not in html
    assert pipeline_url("edit", pipeline) not in html
    assert pipeline_url("delete", pipeline) not in html


def test_editor_sees_create_and_edit_controls_on_the_list(
    world: TeamWorld, pipeline: Pipeline
) -> None:
    html = client_for(world.editor).get(list_url()).content.decode()
    assert create_url() in html
    assert f"{create_url()}?preset=rag-chat" in html
    assert pipeline_url("edit", pipeline) in html


def test_list_remembers_the_team_in_the_session(world: TeamWorld) -> None:
    client = client_for(world.owner)
    client.get(list_url())
    assert client.session["current_team"] == "acme"


def test_outsider_gets_404_on_the_list(world: TeamWorld) -> None:
    assert client_for(world.outsider).get(list_url()).status_code == 404


def test_list_does_not_show_another_teams_pipelines(world: TeamWorld, pipeline: Pipeline) -> None:
    make_pipeline(world.other_team, "globex-secret", name="Globex secret")
    html = client_for(world.owner).get(list_url()).content.decode()
    assert "Globex secret" not in html


def test_anonymous_is_sent_to_login_from_the_list(world: TeamWorld) -> None:
    response = Client().get(list_url())
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


# --- create -------------------------------------------------------------------


@pytest.mark.parametrize("role", WRITERS)
def test_writers_create_a_pipeline_with_every_field(world: TeamWorld, role: str) -> None:
    data = valid_data(
        description="Answers support questions.",
        match_attributes='deployment.environment=prod\ntier=2\nratio=0.5\nbeta=true\ncode="42"',
        budget_p50_ms="900",
        budget_p99_ms="6000",
        objective_target="99.5",
        objective_threshold_ms="4000",
    )
    response = client_for(getattr(world, role)).post(create_url(), data)
    pipeline = Pipeline.objects.get(team=world.team, slug="support-answer")
    assert response.status_code == 302
    assert response["Location"] == pipeline_url("detail", pipeline)
    assert pipeline.name == "Support answer"
    assert pipeline.description == "Answers support questions."
    assert pipeline.match_service == "support-api"
    assert pipeline.match_root_span == "POST /answer*"
    assert pipeline.match_attributes == {
        "deployment.environment": "prod",
        "tier": 2,
        "ratio": 0.5,
        "beta": True,
        "code": "42",
    }
    assert pipeline.budget == {"p50": 900, "p95": 2500, "p99": 6000}
    assert pipeline.objective_target == Decimal("99.5")
    assert pipeline.objective_threshold_ms == 4000
    assert pipeline.stages.count() == 0


def test_create_form_from_a_preset_link_prefills_the_budget(world: TeamWorld) -> None:
    response = client_for(world.owner).get(create_url() + "?preset=rag-chat")
    html = response.content.decode()
    assert response.status_code == 200
    assert 'value="rag-chat" id="id_preset_1" required checked' in html
    assert 'name="budget_p95_ms" value="4000"' in html


def test_create_form_ignores_an_unknown_preset_in_the_link(world: TeamWorld) -> None:
    response = client_for(world.owner).get(create_url() + "?preset=nonsense")
    assert response.status_code == 200


def test_creating_from_the_rag_preset_adds_its_stages_within_the_budget_typed(
    world: TeamWorld,
) -> None:
    client_for(world.editor).post(create_url(), valid_data(preset="rag-chat"))
    pipeline = Pipeline.objects.get(team=world.team, slug="support-answer")
    stages = pipeline.stages.order_by("position")
    # 5, 10, 5, 20 and 45 % of the 2500 ms typed, rounded down to 5 ms under 200 ms
    # and to 10 ms above: 125, 250, 125, 500 and 1125 -> 1120.
    assert [(s.slug, s.budget_ms, s.budget_percentile) for s in stages] == [
        ("embedding", 125, "p95"),
        ("retrieval", 250, "p95"),
        ("rerank", 125, "p95"),
        ("ttft", 500, "p95"),
        ("generation", 1120, "p95"),
    ]


def test_unknown_preset_is_rejected(world: TeamWorld) -> None:
    response = client_for(world.owner).post(create_url(), valid_data(preset="nonsense"))
    assert response.status_code == 422
    assert not Pipeline.objects.exists()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"slug": "Bad Slug!"}, "lowercase letters"),
        ({"slug": "-leading"}, "lowercase letters"),
        ({"slug": "new"}, "reserved"),
        ({"slug": "x" * 51}, "at most 50"),
        ({"name": ""}, "required"),
        ({"name": "n" * 101}, "at most 100"),
        ({"budget_p95_ms": ""}, "Set an end-to-end budget"),
        ({"budget_p95_ms": "0"}, "greater than or equal to 1"),
        ({"budget_p95_ms": "-5"}, "greater than or equal to 1"),
        ({"budget_p95_ms": "3600001"}, "less than or equal to 3600000"),
        ({"budget_p95_ms": "fast"}, "Enter a whole number"),
        ({"objective_target": "99"}, "both a target percentage and a threshold"),
        ({"objective_threshold_ms": "4000"}, "both a target percentage and a threshold"),
        ({"objective_target": "100", "objective_threshold_ms": "4000"}, "less than or equal"),
        ({"match_attributes": "no equals sign"}, "Line 1: write key=value"),
        ({"match_attributes": "=value"}, "Line 1: write key=value"),
        ({"match_attributes": "a=1\na=2"}, "given twice"),
        ({"match_attributes": "\n".join(f"k{i}=v" for i in range(51))}, "At most 50"),
        ({"match_attributes": "k=" + "v" * 5000}, "at most 5000"),
    ],
)
def test_invalid_pipeline_input_is_rejected_inline_and_nothing_is_saved(
    world: TeamWorld, overrides: dict[str, str], message: str
) -> None:
    response = client_for(world.owner).post(create_url(), valid_data(**overrides))
    assert response.status_code == 422
    assert message in response.content.decode()
    assert not Pipeline.objects.filter(team=world.team).exists()


def test_duplicate_slug_is_rejected_inline(world: TeamWorld, pipeline: Pipeline) -> None:
    response = client_for(world.owner).post(create_url(), valid_data(slug="rag-chat"))
    assert response.status_code == 422
    assert "already has a pipeline with this slug" in response.content.decode()
    assert Pipeline.objects.filter(team=world.team).count() == 1


def test_the_same_slug_is_fine_in_another_team(world: TeamWorld) -> None:
    make_pipeline(world.other_team, "support-answer")
    response = client_for(world.owner).post(create_url(), valid_data())
    assert response.status_code == 302
    assert Pipeline.objects.filter(slug="support-answer").count() == 2


def test_viewer_gets_403_on_create(world: TeamWorld) -> None:
    client = client_for(world.viewer)
    assert client.get(create_url()).status_code == 403
    assert client.post(create_url(), valid_data()).status_code == 403
    assert not Pipeline.objects.exists()


def test_outsider_gets_404_on_create(world: TeamWorld) -> None:
    response = client_for(world.outsider).post(create_url(), valid_data())
    assert response.status_code == 404
    assert not Pipeline.objects.filter(team=world.team).exists()


def test_anonymous_is_sent_to_login_from_create(world: TeamWorld) -> None:
    response = Client().post(create_url(), valid_data())
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))
    assert not Pipeline.objects.exists()


# --- edit ---------------------------------------------------------------------


def test_edit_form_shows_current_values_with_attributes_as_lines(
    world: TeamWorld, pipeline: Pipeline
) -> None:
    pipeline.match_attributes = {"tier": 2, "code": "42", "beta": False}
    pipeline.save()
    html = client_for(world.owner).get(pipeline_url("edit", pipeline)).content.decode()
    textarea = html.split('id="id_match_attributes">')[1].split("</textarea>")[0]
    assert sorted(textarea.split()) == ["beta=false", "code=&quot;42&quot;", "tier=2"]
    assert 'name="budget_p95_ms" value="2500"' in html


@pytest.mark.parametrize("role", WRITERS)
def test_writers_edit_a_pipeline(world: TeamWorld, pipeline: Pipeline, role: str) -> None:
    data = valid_data(
        name="RAG chat v2", slug="rag-chat-v2", budget_p95_ms="", budget_p99_ms="5000"
    )
    response = client_for(getattr(world, role)).post(pipeline_url("edit", pipeline), data)
    pipeline.refresh_from_db()
    assert response.status_code == 302
    assert pipeline.name == "RAG chat v2"
    assert pipeline.slug == "rag-chat-v2"
    assert pipeline.budget == {"p99": 5000}
    assert pipeline.objective_target is None
    assert pipeline.objective_threshold_ms is None


def test_edit_rejects_a_duplicate_slug_and_keeps_the_pipeline(
    world: TeamWorld, pipeline: Pipeline
) -> None:
    make_pipeline(world.team, "taken")
    response = client_for(world.owner).post(
        pipeline_url("edit", pipeline), valid_data(slug="taken")
    )
    pipeline.refresh_from_db()
    assert response.status_code == 422
    assert pipeline.slug == "rag-chat"
    assert pipeline.name == "RAG chat"


def test_edit_rejects_removing_every_budget(world: TeamWorld, pipeline: Pipeline) -> None:
    response = client_for(world.owner).post(
        pipeline_url("edit", pipeline), valid_data(budget_p95_ms="")
    )
    pipeline.refresh_from_db()
    assert response.status_code == 422
    assert pipeline.budget == {"p95": 2500}


def test_viewer_gets_403_on_edit(world: TeamWorld, pipeline: Pipeline) -> None:
    client = client_for(world.viewer)
    assert client.get(pipeline_url("edit", pipeline)).status_code == 403
    response = client.post(pipeline_url("edit", pipeline), valid_data(name="Hijacked"))
    pipeline.refresh_from_db()
    assert response.status_code == 403
    assert pipeline.name == "RAG chat"


def test_outsider_gets_404_on_edit(world: TeamWorld, pipeline: Pipeline) -> None:
    response = client_for(world.outsider).post(
        pipeline_url("edit", pipeline), valid_data(name="Hijacked")
    )
    pipeline.refresh_from_db()
    assert response.status_code == 404
    assert pipeline.name == "RAG chat"


def test_outsider_cannot_reach_another_teams_pipeline_through_their_own_team(
    world: TeamWorld, pipeline: Pipeline
) -> None:
    url = reverse("pipelines:edit", kwargs={"team_slug": "globex", "pipeline_slug": "rag-chat"})
    assert client_for(world.outsider).get(url).status_code == 404


def test_anonymous_is_sent_to_login_from_edit(world: TeamWorld, pipeline: Pipeline) -> None:
    response = Client().get(pipeline_url("edit", pipeline))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


# --- delete -------------------------------------------------------------------


def test_delete_asks_for_confirmation_first(world: TeamWorld, pipeline: Pipeline) -> None:
    response = client_for(world.owner).get(pipeline_url("delete", pipeline))
    assert response.status_code == 200
    assert "Delete pipeline" in response.content.decode()
    assert Pipeline.objects.filter(pk=pipeline.pk).exists()


@pytest.mark.parametrize("role", WRITERS)
def test_writers_delete_a_pipeline_with_its_stages(
    world: TeamWorld, pipeline: Pipeline, role: str
) -> None:
    response = client_for(getattr(world, role)).post(pipeline_url("delete", pipeline))
    assert response.status_code == 302
    assert response["Location"] == list_url()
    assert not Pipeline.objects.filter(pk=pipeline.pk).exists()


def test_viewer_gets_403_on_delete(world: TeamWorld, pipeline: Pipeline) -> None:
    client = client_for(world.viewer)
    assert client.get(pipeline_url("delete", pipeline)).status_code == 403
    assert client.post(pipeline_url("delete", pipeline)).status_code == 403
    assert Pipeline.objects.filter(pk=pipeline.pk).exists()


def test_outsider_gets_404_on_delete(world: TeamWorld, pipeline: Pipeline) -> None:
    assert client_for(world.outsider).post(pipeline_url("delete", pipeline)).status_code == 404
    assert Pipeline.objects.filter(pk=pipeline.pk).exists()


def test_anonymous_is_sent_to_login_from_delete(world: TeamWorld, pipeline: Pipeline) -> None:
    response = Client().post(pipeline_url("delete", pipeline))
    assert response.status_code == 302
    assert Pipeline.objects.filter(pk=pipeline.pk).exists()


# --- detail -------------------------------------------------------------------


@pytest.mark.parametrize("role", MEMBERS)
def test_members_see_the_pipeline_page(world: TeamWorld, pipeline: Pipeline, role: str) -> None:
    response = client_for(getattr(world, role)).get(pipeline_url("detail", pipeline))
    html = response.content.decode()
    assert response.status_code == 200
    assert "<html" in html
    assert 'id="allocation-bar"' in html
    assert 'data-stage="retrieval"' in html


def test_htmx_request_for_the_page_gets_only_the_editor(
    world: TeamWorld, pipeline: Pipeline
) -> None:
    response = client_for(world.owner).get(
        pipeline_url("detail", pipeline), headers={"HX-Request": "true"}
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in html
    assert html.lstrip().startswith('<div id="stage-editor"')
    assert "HX-Request" in response["Vary"]
    assert 'id="allocation-bar"' in html


def test_viewer_sees_no_edit_controls_on_the_pipeline_page(
    world: TeamWorld, pipeline: Pipeline
) -> None:
    html = client_for(world.viewer).get(pipeline_url("detail", pipeline)).content.decode()
    assert "Add stage" not in html
    assert "+ Span rule" not in html
    assert 'data-action="move-down"' not in html
    assert pipeline_url("edit", pipeline) not in html


def test_editor_sees_the_stage_editor_controls(world: TeamWorld, pipeline: Pipeline) -> None:
    html = client_for(world.editor).get(pipeline_url("detail", pipeline)).content.decode()
    assert "Add stage" in html
    assert "+ Span rule" in html
    assert 'data-action="move-down"' in html


def test_outsider_gets_404_on_the_pipeline_page(world: TeamWorld, pipeline: Pipeline) -> None:
    assert client_for(world.outsider).get(pipeline_url("detail", pipeline)).status_code == 404


def test_anonymous_is_sent_to_login_from_the_pipeline_page(
    world: TeamWorld, pipeline: Pipeline
) -> None:
    response = Client().get(pipeline_url("detail", pipeline))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_unknown_pipeline_is_404(world: TeamWorld) -> None:
    url = reverse("pipelines:detail", kwargs={"team_slug": "acme", "pipeline_slug": "nope"})
    assert client_for(world.owner).get(url).status_code == 404


# --- budget evaluation settings -----------------------------------------------


def evaluation_of(pipeline: Pipeline) -> tuple[int, int, int]:
    pipeline.refresh_from_db()
    return pipeline.evaluation_window_s, pipeline.min_samples, pipeline.close_after


def test_create_form_offers_the_evaluation_settings_with_their_defaults(world: TeamWorld) -> None:
    html = client_for(world.editor).get(create_url()).content.decode()
    assert "<legend>Budget evaluation</legend>" in html
    assert 'name="evaluation_window_s" value="300"' in html
    assert 'name="min_samples" value="20"' in html
    assert 'name="close_after" value="3"' in html
    assert "60 to 3600; empty means 300." in html


@pytest.mark.parametrize("role", WRITERS)
def test_writers_create_a_pipeline_with_evaluation_settings(world: TeamWorld, role: str) -> None:
    data = valid_data(evaluation_window_s="900", min_samples="50", close_after="6")
    response = client_for(getattr(world, role)).post(create_url(), data)
    assert response.status_code == 302
    pipeline = Pipeline.objects.get(team=world.team, slug="support-answer")
    assert evaluation_of(pipeline) == (900, 50, 6)


def test_empty_evaluation_fields_take_the_defaults(world: TeamWorld) -> None:
    data = valid_data(evaluation_window_s="", min_samples="", close_after="")
    assert client_for(world.owner).post(create_url(), data).status_code == 302
    assert evaluation_of(Pipeline.objects.get(slug="support-answer")) == (300, 20, 3)


@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        ({"evaluation_window_s": "59"}, "evaluation_window_s", "greater than or equal to 60"),
        ({"evaluation_window_s": "3601"}, "evaluation_window_s", "less than or equal to 3600"),
        ({"evaluation_window_s": "5m"}, "evaluation_window_s", "Enter a whole number"),
        ({"evaluation_window_s": "300.5"}, "evaluation_window_s", "Enter a whole number"),
        ({"evaluation_window_s": "9" * 400}, "evaluation_window_s", "less than or equal"),
        ({"min_samples": "0"}, "min_samples", "greater than or equal to 1"),
        ({"min_samples": "100001"}, "min_samples", "less than or equal to 100000"),
        ({"close_after": "0"}, "close_after", "greater than or equal to 1"),
        ({"close_after": "361"}, "close_after", "less than or equal to 360"),
        ({"close_after": "-3"}, "close_after", "greater than or equal to 1"),
    ],
)
def test_invalid_evaluation_settings_are_rejected_next_to_their_field(
    world: TeamWorld, overrides: dict[str, str], field: str, message: str
) -> None:
    response = client_for(world.owner).post(create_url(), valid_data(**overrides))
    html = response.content.decode()
    assert response.status_code == 422
    errors = html.split(f'id="id_{field}_error">')[1].split("</ul>")[0]
    assert message in errors
    assert not Pipeline.objects.filter(team=world.team).exists()


def test_edit_form_shows_the_current_evaluation_settings(
    world: TeamWorld, pipeline: Pipeline
) -> None:
    Pipeline.objects.filter(pk=pipeline.pk).update(
        evaluation_window_s=1200, min_samples=75, close_after=12
    )
    html = client_for(world.owner).get(pipeline_url("edit", pipeline)).content.decode()
    assert 'name="evaluation_window_s" value="1200"' in html
    assert 'name="min_samples" value="75"' in html
    assert 'name="close_after" value="12"' in html


@pytest.mark.parametrize("role", WRITERS)
def test_writers_change_the_evaluation_settings(
    world: TeamWorld, pipeline: Pipeline, role: str
) -> None:
    data = valid_data(slug="rag-chat", evaluation_window_s="60", min_samples="1", close_after="360")
    response = client_for(getattr(world, role)).post(pipeline_url("edit", pipeline), data)
    assert response.status_code == 302
    assert evaluation_of(pipeline) == (60, 1, 360)


def test_edit_with_an_invalid_evaluation_setting_changes_nothing(
    world: TeamWorld, pipeline: Pipeline
) -> None:
    Pipeline.objects.filter(pk=pipeline.pk).update(min_samples=75)
    data = valid_data(slug="rag-chat", name="Renamed", evaluation_window_s="30", close_after="9")
    response = client_for(world.owner).post(pipeline_url("edit", pipeline), data)
    assert response.status_code == 422
    assert "greater than or equal to 60" in response.content.decode()
    assert evaluation_of(pipeline) == (300, 75, 3)
    assert pipeline.name == "RAG chat"


def test_viewer_gets_403_changing_the_evaluation_settings(
    world: TeamWorld, pipeline: Pipeline
) -> None:
    data = valid_data(slug="rag-chat", evaluation_window_s="3600", min_samples="1")
    response = client_for(world.viewer).post(pipeline_url("edit", pipeline), data)
    assert response.status_code == 403
    assert evaluation_of(pipeline) == (300, 20, 3)


def test_outsider_gets_404_changing_the_evaluation_settings(
    world: TeamWorld, pipeline: Pipeline
) -> None:
    data = valid_data(slug="rag-chat", evaluation_window_s="3600", min_samples="1")
    response = client_for(world.outsider).post(pipeline_url("edit", pipeline), data)
    assert response.status_code == 404
    assert evaluation_of(pipeline) == (300, 20, 3)


@pytest.mark.parametrize("role", MEMBERS)
def test_members_see_the_evaluation_settings_on_the_pipeline_page(
    world: TeamWorld, pipeline: Pipeline, role: str
) -> None:
    Pipeline.objects.filter(pk=pipeline.pk).update(
        evaluation_window_s=600, min_samples=1, close_after=5
    )
    html = client_for(getattr(world, role)).get(pipeline_url("detail", pipeline)).content.decode()
    summary = html.split('data-role="evaluation">')[1].split("</dd>")[0]
    assert "over the last 10 min" in summary
    assert "at least 1 sample;" in summary
    assert "after 5 evaluations in a row" in summary
