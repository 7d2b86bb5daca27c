""" "Test on recent traces" keeps the rule typed: with htmx the result comes in beside the
form; without scripts the test is a page with the form, as typed, above its result."""

import re

import pytest

from apps.pipelines.models import Pipeline, SpanRule
from tests.builders.configuration import make_pipeline, make_rule, make_stage
from tests.builders.ingested_traces import ingest, make_rag_pipeline, now_ns
from tests.builders.spans import rag_spans
from tests.conftest import TeamWorld, client_for
from tests.timing import MS

RULE = {"span_name": "vector.search*", "name_match": "glob", "portion": "whole",
        "first_token_event": "first_token"}  # fmt: skip


@pytest.fixture
def rag(world: TeamWorld) -> Pipeline:
    pipeline = make_rag_pipeline(world.team)
    t0 = now_ns() - 10 * 60 * 1_000_000_000
    ingest(world.team, *(rag_spans(0xE0 + i, t0 + i * 1_000 * MS) for i in range(4)))
    return pipeline


def rule_test_url(pipeline: Pipeline, slug: str = "retrieval") -> str:
    stage = pipeline.stages.get(slug=slug)
    return f"/teams/acme/dashboards/{pipeline.slug}/stages/{stage.pk}/rule-test/"


def rule_form(html: str) -> str:
    found = re.search(r'<form class="rule-form".*?</form>', html, flags=re.S)
    assert found, "the rule form is gone"
    return found.group(0)


@pytest.mark.parametrize("role", ["owner", "editor"])
def test_without_scripts_the_result_comes_below_the_rule_as_typed(
    world: TeamWorld, rag: Pipeline, role: str
) -> None:
    response = client_for(getattr(world, role)).get(rule_test_url(rag), RULE)
    html = response.content.decode()
    assert response.status_code == 200
    form = rule_form(html)
    assert 'name="span_name" value="vector.search*"' in form
    assert re.search(r'<option value="glob" selected>', form)
    # The result sits inside the form, under the fields it is for.
    assert re.search(r'data-role="matched">8<', form)
    stage = rag.stages.get(slug="retrieval")
    assert f'action="/teams/acme/pipelines/rag-chat/stages/{stage.pk}/rules/new/"' in form
    assert ">Add rule</button>" in form
    assert ">Test on recent traces</button>" in form
    assert "hx-post" not in form  # a page of its own: the form is not the editor's
    assert "Back to the stages" in form


def test_a_viewer_tests_the_rule_but_cannot_save_it(world: TeamWorld, rag: Pipeline) -> None:
    form = rule_form(client_for(world.viewer).get(rule_test_url(rag), RULE).content.decode())
    assert re.search(r'data-role="matched">8<', form)
    assert "Add rule" not in form
    assert "Save rule" not in form
    assert ">Test on recent traces</button>" in form


def test_a_rule_being_edited_is_saved_where_it_was(world: TeamWorld, rag: Pipeline) -> None:
    stage = rag.stages.get(slug="retrieval")
    rule = stage.rules.get()
    html = client_for(world.editor).get(rule_test_url(rag), {**RULE, "rule": str(rule.pk)})
    form = rule_form(html.content.decode())
    edit = f"/teams/acme/pipelines/rag-chat/stages/{stage.pk}/rules/{rule.pk}/edit/"
    assert f'action="{edit}"' in form
    assert f'<input type="hidden" name="rule" value="{rule.pk}">' in form
    assert ">Save rule</button>" in form

    saved = client_for(world.editor).post(edit, {**RULE, "span_name": "vector.*"})
    assert saved.status_code == 302
    assert SpanRule.objects.get(pk=rule.pk).span_name == "vector.*"


@pytest.mark.parametrize("value", ["abc", "-1", "²", "9" * 40, "", "1.5"])
def test_a_rule_parameter_that_names_no_rule_is_left_out(
    world: TeamWorld, rag: Pipeline, value: str
) -> None:
    response = client_for(world.editor).get(rule_test_url(rag), {**RULE, "rule": value})
    assert response.status_code == 200
    assert "/rules/new/" in rule_form(response.content.decode())


def test_another_stages_or_teams_rule_is_not_found(world: TeamWorld, rag: Pipeline) -> None:
    ttft_rule = rag.stages.get(slug="ttft").rules.get()
    theirs = make_rule(
        make_stage(make_pipeline(world.other_team, "rag-chat"), "retrieval"), span_name="x*"
    )
    client = client_for(world.editor)
    for rule in (ttft_rule, theirs):
        assert client.get(rule_test_url(rag), {**RULE, "rule": str(rule.pk)}).status_code == 404
    assert client_for(world.outsider).get(rule_test_url(rag), RULE).status_code == 404


def test_a_malformed_rule_is_shown_with_its_errors_in_the_form(
    world: TeamWorld, rag: Pipeline
) -> None:
    response = client_for(world.editor).get(
        rule_test_url(rag), {**RULE, "name_match": "nope", "span_name": "<b>x</b>" * 100}
    )
    form = rule_form(response.content.decode())
    assert response.status_code == 200
    assert "Fix the rule to see what it matches." in form
    assert "Select a valid choice" in form
    assert "<b>x</b>" not in form


def test_htmx_gets_the_result_alone_for_the_form_to_keep(world: TeamWorld, rag: Pipeline) -> None:
    html = client_for(world.editor).get(rule_test_url(rag), RULE, HTTP_HX_REQUEST="true").content
    assert b"<form" not in html
    assert re.search(rb'data-role="matched">8<', html)


def test_the_editors_test_button_puts_the_result_beside_the_form(
    world: TeamWorld, rag: Pipeline
) -> None:
    stage = rag.stages.get(slug="retrieval")
    add = f"/teams/acme/pipelines/rag-chat/stages/{stage.pk}/rules/new/"
    form = rule_form(client_for(world.editor).get(add, HTTP_HX_REQUEST="true").content.decode())
    button = re.search(r"<button[^>]*>Test on recent traces</button>", form)
    assert button
    assert f'hx-get="{rule_test_url(rag)}"' in button.group(0)
    assert 'hx-target="previous .rule-test"' in button.group(0)
    assert 'hx-include="closest form"' in button.group(0)
    assert f'formaction="{rule_test_url(rag)}"' in button.group(0)
