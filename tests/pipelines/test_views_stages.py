import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from apps.pipelines.models import Pipeline, Stage
from tests.builders.configuration import make_pipeline, make_rule, make_stage
from tests.conftest import TeamWorld, client_for

pytestmark = pytest.mark.django_db
HTMX = {"HX-Request": "true"}


@pytest.fixture
def pipeline(world: TeamWorld) -> Pipeline:
    pipeline = make_pipeline(world.team, "rag-chat", budget={"p95": 2000})
    make_stage(pipeline, "retrieval", name="Retrieval", budget_ms=400)
    make_stage(pipeline, "rerank", name="Rerank", budget_ms=200)
    make_stage(pipeline, "generation", name="Generation", budget_ms=1000)
    return pipeline


@pytest.fixture
def foreign_stage(world: TeamWorld) -> Stage:
    return make_stage(make_pipeline(world.other_team, "globex-chat"), "secret", budget_ms=10)


def stage_url(name: str, pipeline: Pipeline, stage: Stage | None = None) -> str:
    kwargs: dict[str, Any] = {"team_slug": pipeline.team.slug, "pipeline_slug": pipeline.slug}
    if stage is not None:
        kwargs["stage_id"] = stage.id
    return reverse(f"pipelines:{name}", kwargs=kwargs)


def stage(pipeline: Pipeline, slug: str) -> Stage:
    return pipeline.stages.get(slug=slug)


def order(pipeline: Pipeline) -> list[str]:
    return list(pipeline.stages.order_by("position").values_list("slug", flat=True))


def stage_data(**overrides: str) -> dict[str, str]:
    data = {"name": "Auth", "slug": "auth", "budget_ms": "50", "budget_percentile": "p95"}
    data.update(overrides)
    return data


def segments(html: str) -> list[str]:
    bar = html.split('id="allocation-bar"')[1].split("</section>")[0]
    return re.findall(r'data-stage="([^"]+)"', bar)


# --- add ----------------------------------------------------------------------


@pytest.mark.parametrize("role", ["owner", "editor"])
def test_writers_add_a_stage_at_the_end_and_get_the_editor_back(
    world: TeamWorld, pipeline: Pipeline, role: str
) -> None:
    response = client_for(getattr(world, role)).post(
        stage_url("stage_add", pipeline), stage_data(), headers=HTMX
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert response["HX-Retarget"] == "#stage-editor"
    assert response["HX-Reswap"] == "outerHTML"
    assert "<html" not in html
    assert order(pipeline) == ["retrieval", "rerank", "generation", "auth"]
    added = stage(pipeline, "auth")
    assert (added.name, added.budget_ms, added.budget_percentile) == ("Auth", 50, "p95")
    assert segments(html) == ["retrieval", "rerank", "generation", "auth"]
    assert "allocated 1.65 s of 2 s (82%)" in html


def test_a_stage_without_budget_is_listed_as_unbudgeted(
    world: TeamWorld, pipeline: Pipeline
) -> None:
    response = client_for(world.owner).post(
        stage_url("stage_add", pipeline), stage_data(budget_ms=""), headers=HTMX
    )
    html = response.content.decode()
    assert stage(pipeline, "auth").budget_ms is None
    assert 'data-unbudgeted="auth"' in html
    assert "auth" not in segments(html)


def test_adding_a_stage_without_htmx_redirects_to_the_pipeline(
    world: TeamWorld, pipeline: Pipeline
) -> None:
    response = client_for(world.owner).post(stage_url("stage_add", pipeline), stage_data())
    assert response.status_code == 302
    assert response["Location"] == stage_url("detail", pipeline)
    assert "auth" in order(pipeline)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"slug": "Not A Slug"}, "lowercase letters"),
        ({"slug": ""}, "This field is required"),
        ({"slug": "retrieval"}, "already has a stage with this slug"),
        ({"name": ""}, "This field is required"),
        ({"name": "n" * 101}, "at most 100"),
        ({"budget_ms": "0"}, "greater than or equal to 1"),
        ({"budget_ms": "-10"}, "greater than or equal to 1"),
        ({"budget_ms": "99999999999"}, "less than or equal to 3600000"),
        ({"budget_ms": "1.5"}, "Enter a whole number"),
        ({"budget_percentile": "p42"}, "Select a valid choice"),
    ],
)
def test_invalid_stage_input_comes_back_inline_and_nothing_is_saved(
    world: TeamWorld, pipeline: Pipeline, overrides: dict[str, str], message: str
) -> None:
    response = client_for(world.owner).post(
        stage_url("stage_add", pipeline), stage_data(**overrides), headers=HTMX
    )
    html = response.content.decode()
    assert response.status_code == 422
    assert message in html
    assert html.lstrip().startswith('<form class="stage-form"')
    assert "<html" not in html
    assert order(pipeline) == ["retrieval", "rerank", "generation"]


def test_invalid_stage_without_htmx_gets_a_full_page_with_the_form(
    world: TeamWorld, pipeline: Pipeline
) -> None:
    response = client_for(world.owner).post(
        stage_url("stage_add", pipeline), stage_data(slug="BAD")
    )
    html = response.content.decode()
    assert response.status_code == 422
    assert "<html" in html
    assert "lowercase letters" in html
    assert pipeline.stages.count() == 3


def test_viewer_gets_403_on_adding_a_stage(world: TeamWorld, pipeline: Pipeline) -> None:
    response = client_for(world.viewer).post(
        stage_url("stage_add", pipeline), stage_data(), headers=HTMX
    )
    assert response.status_code == 403
    assert pipeline.stages.count() == 3


def test_outsider_gets_404_on_adding_a_stage(world: TeamWorld, pipeline: Pipeline) -> None:
    response = client_for(world.outsider).post(stage_url("stage_add", pipeline), stage_data())
    assert response.status_code == 404
    assert pipeline.stages.count() == 3


def test_anonymous_is_sent_to_login_when_adding_a_stage(
    world: TeamWorld, pipeline: Pipeline
) -> None:
    response = Client().post(stage_url("stage_add", pipeline), stage_data())
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))
    assert pipeline.stages.count() == 3


# --- edit ---------------------------------------------------------------------


def test_htmx_edit_gets_the_stage_form_filled_in(world: TeamWorld, pipeline: Pipeline) -> None:
    target = stage(pipeline, "rerank")
    response = client_for(world.editor).get(stage_url("stage_edit", pipeline, target), headers=HTMX)
    html = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in html
    assert 'value="rerank"' in html
    assert 'name="budget_ms" value="200"' in html
    assert stage_url("stage_edit", pipeline, target) in html


def test_plain_edit_request_gets_a_full_page(world: TeamWorld, pipeline: Pipeline) -> None:
    target = stage(pipeline, "rerank")
    response = client_for(world.editor).get(stage_url("stage_edit", pipeline, target))
    html = response.content.decode()
    assert response.status_code == 200
    assert "<html" in html
    assert 'value="rerank"' in html


@pytest.mark.parametrize("role", ["owner", "editor"])
def test_writers_edit_a_stage_inline(world: TeamWorld, pipeline: Pipeline, role: str) -> None:
    target = stage(pipeline, "rerank")
    response = client_for(getattr(world, role)).post(
        stage_url("stage_edit", pipeline, target),
        stage_data(name="Re-rank", slug="rerank", budget_ms="300", budget_percentile="p99"),
        headers=HTMX,
    )
    target.refresh_from_db()
    html = response.content.decode()
    assert response.status_code == 200
    assert (target.name, target.budget_ms, target.budget_percentile) == ("Re-rank", 300, "p99")
    assert "allocated 1.7 s of 2 s (85%)" in html
    assert "other percentile" in html


def test_editing_a_stage_to_a_taken_slug_is_rejected_inline(
    world: TeamWorld, pipeline: Pipeline
) -> None:
    target = stage(pipeline, "rerank")
    response = client_for(world.owner).post(
        stage_url("stage_edit", pipeline, target),
        stage_data(name="Rerank", slug="retrieval", budget_ms="999"),
        headers=HTMX,
    )
    target.refresh_from_db()
    assert response.status_code == 422
    assert "already has a stage with this slug" in response.content.decode()
    assert (target.slug, target.budget_ms) == ("rerank", 200)


def test_viewer_gets_403_on_editing_a_stage(world: TeamWorld, pipeline: Pipeline) -> None:
    target = stage(pipeline, "rerank")
    client = client_for(world.viewer)
    assert client.get(stage_url("stage_edit", pipeline, target)).status_code == 403
    response = client.post(stage_url("stage_edit", pipeline, target), stage_data(slug="x"))
    target.refresh_from_db()
    assert response.status_code == 403
    assert target.slug == "rerank"


def test_outsider_gets_404_on_editing_a_stage(world: TeamWorld, pipeline: Pipeline) -> None:
    target = stage(pipeline, "rerank")
    response = client_for(world.outsider).post(
        stage_url("stage_edit", pipeline, target), stage_data(slug="x")
    )
    target.refresh_from_db()
    assert response.status_code == 404
    assert target.slug == "rerank"


def test_anonymous_is_sent_to_login_when_editing_a_stage(
    world: TeamWorld, pipeline: Pipeline
) -> None:
    response = Client().get(stage_url("stage_edit", pipeline, stage(pipeline, "rerank")))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_another_teams_stage_id_under_our_pipeline_is_404(
    world: TeamWorld, pipeline: Pipeline, foreign_stage: Stage
) -> None:
    client = client_for(world.owner)
    edit = stage_url("stage_edit", pipeline, foreign_stage)
    assert client.get(edit).status_code == 404
    assert client.post(edit, stage_data(slug="stolen")).status_code == 404
    assert (
        client.post(
            stage_url("stage_move", pipeline, foreign_stage), {"direction": "up"}
        ).status_code
        == 404
    )
    assert client.post(stage_url("stage_delete", pipeline, foreign_stage)).status_code == 404
    foreign_stage.refresh_from_db()
    assert foreign_stage.slug == "secret"


def test_a_stage_of_another_pipeline_of_the_same_team_is_404(
    world: TeamWorld, pipeline: Pipeline
) -> None:
    other = make_stage(make_pipeline(world.team, "other"), "other-stage")
    response = client_for(world.owner).post(stage_url("stage_delete", pipeline, other))
    assert response.status_code == 404
    assert Stage.objects.filter(pk=other.pk).exists()


# --- delete -------------------------------------------------------------------


@pytest.mark.parametrize("role", ["owner", "editor"])
def test_writers_delete_a_stage_and_the_rest_close_up(
    world: TeamWorld, pipeline: Pipeline, role: str
) -> None:
    target = stage(pipeline, "retrieval")
    make_rule(target)
    response = client_for(getattr(world, role)).post(
        stage_url("stage_delete", pipeline, target), headers=HTMX
    )
    assert response.status_code == 200
    assert order(pipeline) == ["rerank", "generation"]
    assert list(pipeline.stages.order_by("position").values_list("position", flat=True)) == [0, 1]
    assert segments(response.content.decode()) == ["rerank", "generation"]


def test_deleting_a_stage_needs_post(world: TeamWorld, pipeline: Pipeline) -> None:
    target = stage(pipeline, "retrieval")
    response = client_for(world.owner).get(stage_url("stage_delete", pipeline, target))
    assert response.status_code == 405
    assert Stage.objects.filter(pk=target.pk).exists()


def test_viewer_gets_403_on_deleting_a_stage(world: TeamWorld, pipeline: Pipeline) -> None:
    target = stage(pipeline, "retrieval")
    response = client_for(world.viewer).post(
        stage_url("stage_delete", pipeline, target), headers=HTMX
    )
    assert response.status_code == 403
    assert Stage.objects.filter(pk=target.pk).exists()


def test_outsider_gets_404_on_deleting_a_stage(world: TeamWorld, pipeline: Pipeline) -> None:
    target = stage(pipeline, "retrieval")
    response = client_for(world.outsider).post(stage_url("stage_delete", pipeline, target))
    assert response.status_code == 404
    assert Stage.objects.filter(pk=target.pk).exists()


def test_anonymous_is_sent_to_login_when_deleting_a_stage(
    world: TeamWorld, pipeline: Pipeline
) -> None:
    target = stage(pipeline, "retrieval")
    response = Client().post(stage_url("stage_delete", pipeline, target))
    assert response.status_code == 302
    assert Stage.objects.filter(pk=target.pk).exists()


# --- reorder ------------------------------------------------------------------


@pytest.mark.parametrize("role", ["owner", "editor"])
def test_moving_a_stage_down_swaps_it_with_the_next(
    world: TeamWorld, pipeline: Pipeline, role: str
) -> None:
    response = client_for(getattr(world, role)).post(
        stage_url("stage_move", pipeline, stage(pipeline, "retrieval")),
        {"direction": "down"},
        headers=HTMX,
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert order(pipeline) == ["rerank", "retrieval", "generation"]
    assert segments(html) == ["rerank", "retrieval", "generation"]
    assert html.index('data-stage-slug="rerank"') < html.index('data-stage-slug="retrieval"')


def test_moving_a_stage_up_swaps_it_with_the_previous(world: TeamWorld, pipeline: Pipeline) -> None:
    client_for(world.owner).post(
        stage_url("stage_move", pipeline, stage(pipeline, "generation")), {"direction": "up"}
    )
    assert order(pipeline) == ["retrieval", "generation", "rerank"]


def test_moving_the_first_stage_up_changes_nothing(world: TeamWorld, pipeline: Pipeline) -> None:
    client_for(world.owner).post(
        stage_url("stage_move", pipeline, stage(pipeline, "retrieval")), {"direction": "up"}
    )
    assert order(pipeline) == ["retrieval", "rerank", "generation"]


@pytest.mark.parametrize("direction", ["", "sideways", "-1"])
def test_moving_in_an_unknown_direction_is_a_bad_request(
    world: TeamWorld, pipeline: Pipeline, direction: str
) -> None:
    response = client_for(world.owner).post(
        stage_url("stage_move", pipeline, stage(pipeline, "retrieval")), {"direction": direction}
    )
    assert response.status_code == 400
    assert order(pipeline) == ["retrieval", "rerank", "generation"]


def test_viewer_gets_403_on_moving_a_stage(world: TeamWorld, pipeline: Pipeline) -> None:
    response = client_for(world.viewer).post(
        stage_url("stage_move", pipeline, stage(pipeline, "retrieval")), {"direction": "down"}
    )
    assert response.status_code == 403
    assert order(pipeline) == ["retrieval", "rerank", "generation"]


def test_outsider_gets_404_on_moving_a_stage(world: TeamWorld, pipeline: Pipeline) -> None:
    response = client_for(world.outsider).post(
        stage_url("stage_move", pipeline, stage(pipeline, "retrieval")), {"direction": "down"}
    )
    assert response.status_code == 404
    assert order(pipeline) == ["retrieval", "rerank", "generation"]


def test_anonymous_is_sent_to_login_when_moving_a_stage(
    world: TeamWorld, pipeline: Pipeline
) -> None:
    response = Client().post(
        stage_url("stage_move", pipeline, stage(pipeline, "retrieval")), {"direction": "down"}
    )
    assert response.status_code == 302
    assert order(pipeline) == ["retrieval", "rerank", "generation"]


# --- allocation bar -------------------------------------------------------------


def test_bar_segments_are_sized_by_their_share_of_the_end_to_end_budget(
    world: TeamWorld, pipeline: Pipeline
) -> None:
    html = client_for(world.viewer).get(stage_url("detail", pipeline)).content.decode()
    assert re.search(r'data-stage="retrieval" style="width: 20.00%"', html)
    assert re.search(r'data-stage="rerank" style="width: 10.00%"', html)
    assert re.search(r'data-stage="generation" style="width: 50.00%"', html)
    assert "allocated 1.6 s of 2 s (80%)" in html
    assert 'data-over="false"' in html
    assert "the real check comes from traces" in html
    assert "allocation-warning" not in html


def test_bar_shows_over_allocation_and_scales_segments_to_fit(
    world: TeamWorld, pipeline: Pipeline
) -> None:
    make_stage(pipeline, "ttft", budget_ms=900)
    html = client_for(world.owner).get(stage_url("detail", pipeline)).content.decode()
    assert "allocated 2.5 s of 2 s (125%)" in html
    assert 'data-over="true"' in html
    warning = re.search(r'<p class="allocation-warning"[^>]*>(.*?)</p>', html, flags=re.S)
    assert warning
    words = re.sub(r"<[^>]+>", "", warning.group(1))
    assert words.startswith(
        "Over-allocated: stages allocate 2.5 s of a 2 s p95 budget (125 %), 500 ms more "
        "than the end-to-end budget"
    )
    assert "/teams/acme/dashboards/rag-chat/fit/" in warning.group(1)
    assert re.search(r'data-stage="generation" style="width: 40.00%"', html)


def test_stages_of_an_engines_parts_lie_within_and_are_not_allocated_again(
    world: TeamWorld, pipeline: Pipeline
) -> None:
    queue = make_stage(pipeline, "engine-queue", name="Engine queue", budget_ms=300)
    make_rule(queue, span_name="llm_request", portion="queue")
    # A stage with an engine part and a whole-span rule is an ordinary stage.
    mixed = make_stage(pipeline, "mixed", name="Mixed", budget_ms=100)
    make_rule(mixed, span_name="llm_request", portion="prefill")
    make_rule(mixed, span_name="cache*")
    html = client_for(world.viewer).get(stage_url("detail", pipeline)).content.decode()
    assert "engine-queue" not in segments(html)
    assert 'data-within="engine-queue"' in html
    assert "Engine queue · 300 ms" in html
    assert "mixed" in segments(html)
    assert "allocated 1.7 s of 2 s (85%)" in html


def test_bar_flags_stages_at_another_percentile_and_lists_unbudgeted_ones(
    world: TeamWorld, pipeline: Pipeline
) -> None:
    make_stage(pipeline, "tools", name="Tools", budget_ms=100, budget_percentile="p50")
    make_stage(pipeline, "queue", name="Queue", budget_ms=None)
    html = client_for(world.owner).get(stage_url("detail", pipeline)).content.decode()
    assert re.search(
        r'class="allocation-segment stage-\d other-percentile" data-stage="tools"', html
    )
    assert "Tools · p50" in html
    assert 'data-unbudgeted="queue"' in html
    assert "queue" not in segments(html)
