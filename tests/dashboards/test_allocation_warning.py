"""Stages given more than the end-to-end budget are said in words on the pipeline
dashboard, beside its budget bar, and on the stage editor's."""

import re

import pytest

from apps.pipelines.models import Pipeline, Stage
from tests.builders.configuration import make_pipeline, make_stage
from tests.conftest import TeamWorld, client_for

DASHBOARD = "/teams/acme/dashboards/ask/"
EDITOR = "/teams/acme/pipelines/ask/"
MEMBERS = ["owner", "editor", "viewer"]


@pytest.fixture
def ask(world: TeamWorld) -> Pipeline:
    pipeline = make_pipeline(world.team, "ask", name="Ask", budget={"p50": 900, "p95": 2500})
    make_stage(pipeline, "retrieval", budget_ms=580)
    make_stage(pipeline, "generation", budget_ms=2500)
    make_stage(pipeline, "queue", budget_ms=None)
    return pipeline


def warning(html: str) -> str | None:
    found = re.search(r'<p class="allocation-warning" role="alert"[^>]*>(.*?)</p>', html, re.S)
    return " ".join(re.sub(r"<[^>]+>", " ", found.group(1)).split()) if found else None


@pytest.mark.parametrize("role", MEMBERS)
@pytest.mark.parametrize("url", [DASHBOARD, EDITOR])
def test_over_allocation_is_said_in_words(
    world: TeamWorld, ask: Pipeline, role: str, url: str
) -> None:
    html = client_for(getattr(world, role)).get(url).content.decode()
    said = warning(html)
    # 580 + 2500 = 3080 ms against 2500 at p95 (the highest percentile set): 123.2 %.
    assert said is not None
    assert said.startswith(
        "Over-allocated: stages allocate 3.08 s of a 2.5 s p95 budget (123 %), 580 ms more "
        "than the end-to-end budget"
    )
    assert "the fit check suggests both" in said


def test_no_warning_while_the_stages_fit(world: TeamWorld, ask: Pipeline) -> None:
    Stage.objects.filter(pipeline=ask, slug="generation").update(budget_ms=1920)
    for url in (DASHBOARD, EDITOR):
        html = client_for(world.viewer).get(url).content.decode()
        assert warning(html) is None
        assert "Over-allocated" not in html


def test_a_budget_of_exactly_the_end_to_end_budget_is_no_over_allocation(
    world: TeamWorld, ask: Pipeline
) -> None:
    # 580 + 1919 + 1 = 2500 exactly, then one more.
    Stage.objects.filter(pipeline=ask, slug="generation").update(budget_ms=1919)
    Stage.objects.filter(pipeline=ask, slug="queue").update(budget_ms=1)
    assert warning(client_for(world.viewer).get(DASHBOARD).content.decode()) is None
    Stage.objects.filter(pipeline=ask, slug="queue").update(budget_ms=2)
    said = warning(client_for(world.viewer).get(DASHBOARD).content.decode())
    assert said is not None
    assert "2.5 s of a 2.5 s p95 budget (100 %), 1 ms more" in said


def test_outsiders_see_neither_page(world: TeamWorld, ask: Pipeline) -> None:
    for url in (DASHBOARD, EDITOR):
        assert client_for(world.outsider).get(url).status_code == 404
