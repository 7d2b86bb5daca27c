"""The creation form shows what a preset creates under the budget typed, with htmx and
without, and creates exactly that."""

import re

import pytest
from django.urls import reverse

from apps.pipelines.models import Pipeline
from tests.conftest import TeamWorld, client_for
from tests.pipelines.test_views_pipelines import valid_data

pytestmark = pytest.mark.django_db
URL = "/teams/acme/pipelines/new/"
RAG_SLUGS = ["embedding", "retrieval", "rerank", "ttft", "generation"]


def preview_budgets(html: str) -> dict[str, str]:
    """Stage slug -> the budget cell's text, from the preview table."""
    rows = re.findall(
        r'<tr data-stage="([\w-]+)">.*?data-role="budget">(.*?)</td>', html, flags=re.S
    )
    return {slug: " ".join(re.sub(r"<[^>]+>", " ", cell).split()) for slug, cell in rows}


def test_the_preset_link_shows_its_stages_at_the_default_budget(world: TeamWorld) -> None:
    response = client_for(world.editor).get(URL, {"preset": "rag-chat"})
    html = response.content.decode()
    assert response.status_code == 200
    assert reverse("pipelines:create", kwargs={"team_slug": "acme"}) == URL
    assert preview_budgets(html) == {
        "embedding": "200 ms p95", "retrieval": "400 ms p95", "rerank": "200 ms p95",
        "ttft": "800 ms p95", "generation": "1800 ms p95",
    }  # fmt: skip
    assert "Stages get <strong>3400 ms of the 4000 ms p95 budget</strong> (85 %)" in html
    assert "db.system" in html
    assert "<code>qdrant</code>" in html


@pytest.mark.parametrize("role", ["owner", "editor"])
def test_htmx_gets_the_preview_alone_for_the_budget_being_typed(
    world: TeamWorld, role: str
) -> None:
    response = client_for(getattr(world, role)).get(
        URL, {"preset": "rag-chat", "budget_p95_ms": "2000"}, HTTP_HX_REQUEST="true"
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith('<section id="preset-preview"')
    assert "<form" not in html
    assert preview_budgets(html) == {
        "embedding": "100 ms p95", "retrieval": "200 ms p95", "rerank": "100 ms p95",
        "ttft": "400 ms p95", "generation": "900 ms p95",
    }  # fmt: skip
    assert "1700 ms of the 2000 ms p95 budget" in html
    assert response["Vary"].count("HX-Request") == 1


def test_the_preview_follows_the_highest_percentile_typed(world: TeamWorld) -> None:
    html = (
        client_for(world.owner)
        .get(
            URL,
            {"preset": "streaming-chat", "budget_p50_ms": "900", "budget_p99_ms": "6000"},
            HTTP_HX_REQUEST="true",
        )
        .content.decode()
    )
    assert preview_budgets(html) == {"ttft": "1500 ms p99", "generation": "3900 ms p99"}


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ({"preset": "rag-chat", "budget_p95_ms": ""}, "Type an end-to-end budget"),
        ({"preset": "rag-chat", "budget_p95_ms": "fast"}, "Type an end-to-end budget"),
        ({"preset": "rag-chat", "budget_p95_ms": "-5"}, "Type an end-to-end budget"),
        ({"preset": "rag-chat", "budget_p95_ms": "9" * 5000}, "Type an end-to-end budget"),
        ({"preset": "blank", "budget_p95_ms": "2000"}, "creates the pipeline alone"),
        ({"preset": "<script>alert(1)</script>"}, "creates the pipeline alone"),
        ({"preset": "x" * 10_000, "budget_p95_ms": "2000"}, "creates the pipeline alone"),
    ],
)
def test_a_preview_of_malformed_input_says_what_is_missing(
    world: TeamWorld, query: dict[str, str], says: str
) -> None:
    response = client_for(world.editor).get(URL, query, HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert response.status_code == 200
    assert says in html
    assert "<script>alert" not in html
    assert len(html) < 20_000


def test_without_scripts_preview_posts_back_and_keeps_what_was_typed(world: TeamWorld) -> None:
    data = valid_data(preset="rag-chat", budget_p95_ms="2000", name="Ask", slug="ask")
    response = client_for(world.editor).post(URL, {**data, "preview": "1"})
    html = response.content.decode()
    assert response.status_code == 200
    assert not Pipeline.objects.exists()
    assert 'name="name" value="Ask"' in html
    assert 'name="budget_p95_ms" value="2000"' in html
    assert 'value="rag-chat" id="id_preset_1" required checked' in html
    assert "errorlist" not in html  # a preview judges nothing
    assert preview_budgets(html)["generation"] == "900 ms p95"


def test_the_pipeline_created_has_the_budgets_the_preview_showed(world: TeamWorld) -> None:
    client = client_for(world.editor)
    data = valid_data(preset="rag-chat", budget_p95_ms="2500")
    shown = preview_budgets(client.post(URL, {**data, "preview": "1"}).content.decode())
    assert client.post(URL, data).status_code == 302
    pipeline = Pipeline.objects.get(team=world.team, slug="support-answer")
    created = {s.slug: f"{s.budget_ms} ms {s.budget_percentile}" for s in pipeline.stages.all()}
    assert created == shown
    assert list(shown) == RAG_SLUGS


def test_a_refused_form_still_shows_the_preview(world: TeamWorld) -> None:
    data = valid_data(preset="rag-chat", budget_p95_ms="2000", slug="Bad Slug!")
    response = client_for(world.editor).post(URL, data)
    assert response.status_code == 422
    assert preview_budgets(response.content.decode())["ttft"] == "400 ms p95"


def test_the_edit_form_has_no_preview(world: TeamWorld) -> None:
    client = client_for(world.editor)
    client.post(URL, valid_data(preset="rag-chat"))
    html = client.get("/teams/acme/pipelines/support-answer/edit/").content.decode()
    assert 'id="preset-preview"' not in html
    assert 'name="preview"' not in html


def test_viewers_are_refused_and_outsiders_see_nothing(world: TeamWorld) -> None:
    query = {"preset": "rag-chat", "budget_p95_ms": "2000"}
    viewer = client_for(world.viewer)
    assert viewer.get(URL, query, HTTP_HX_REQUEST="true").status_code == 403
    assert viewer.post(URL, {**valid_data(), "preview": "1"}).status_code == 403
    outsider = client_for(world.outsider)
    assert outsider.get(URL, query, HTTP_HX_REQUEST="true").status_code == 404
    assert outsider.post(URL, {**valid_data(), "preview": "1"}).status_code == 404
    assert not Pipeline.objects.exists()
