from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from apps.pipelines.models import Pipeline, SpanRule, Stage
from tests.builders.configuration import make_pipeline, make_rule, make_stage
from tests.conftest import TeamWorld, client_for

pytestmark = pytest.mark.django_db
HTMX = {"HX-Request": "true"}


@pytest.fixture
def stage(world: TeamWorld) -> Stage:
    return make_stage(make_pipeline(world.team, "rag-chat"), "ttft", name="TTFT", budget_ms=800)


@pytest.fixture
def rule(stage: Stage) -> SpanRule:
    return make_rule(
        stage, attributes={"gen_ai.operation.name": "chat"}, portion="until_first_token"
    )


@pytest.fixture
def foreign_rule(world: TeamWorld) -> SpanRule:
    foreign_stage = make_stage(make_pipeline(world.other_team, "globex-chat"), "secret")
    return make_rule(foreign_stage, span_name="secret*")


def rule_url(name: str, stage: Stage, rule: SpanRule | None = None) -> str:
    pipeline: Pipeline = stage.pipeline
    kwargs: dict[str, Any] = {
        "team_slug": pipeline.team.slug,
        "pipeline_slug": pipeline.slug,
        "stage_id": stage.id,
    }
    if rule is not None:
        kwargs["rule_id"] = rule.id
    return reverse(f"pipelines:{name}", kwargs=kwargs)


def rule_data(**overrides: str) -> dict[str, str]:
    data = {
        "span_name": "",
        "name_match": "glob",
        "attributes": "",
        "span_kind": "",
        "service": "",
        "portion": "whole",
        "first_token_event": "first_token",
    }
    data.update(overrides)
    return data


# --- add ----------------------------------------------------------------------


def test_htmx_request_for_a_new_rule_gets_the_blank_form(world: TeamWorld, stage: Stage) -> None:
    response = client_for(world.editor).get(rule_url("rule_add", stage), headers=HTMX)
    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith('<form class="rule-form"')
    assert 'name="first_token_event" value="first_token"' in html


@pytest.mark.parametrize("role", ["owner", "editor"])
def test_writers_add_a_span_rule_with_typed_attributes(
    world: TeamWorld, stage: Stage, role: str
) -> None:
    data = rule_data(
        span_name="^chat\\.(completions|stream)$",
        name_match="regex",
        attributes="openinference.span.kind=LLM\ngen_ai.request.max_tokens=512\nstream=true",
        span_kind="client",
        service="llm-gateway",
        portion="after_first_token",
        first_token_event="gen.first_chunk",
    )
    response = client_for(getattr(world, role)).post(
        rule_url("rule_add", stage), data, headers=HTMX
    )
    rule = stage.rules.get()
    assert response.status_code == 200
    assert response["HX-Retarget"] == "#stage-editor"
    assert rule.span_name == "^chat\\.(completions|stream)$"
    assert rule.name_match == "regex"
    assert rule.attributes == {
        "openinference.span.kind": "LLM",
        "gen_ai.request.max_tokens": 512,
        "stream": True,
    }
    assert (rule.span_kind, rule.service) == ("client", "llm-gateway")
    assert (rule.portion, rule.first_token_event) == ("after_first_token", "gen.first_chunk")
    assert "openinference.span.kind=LLM" in response.content.decode()


def test_a_blank_first_token_event_falls_back_to_first_token(
    world: TeamWorld, stage: Stage
) -> None:
    client_for(world.owner).post(
        rule_url("rule_add", stage),
        rule_data(span_name="llm*", portion="until_first_token", first_token_event=" "),
        headers=HTMX,
    )
    assert stage.rules.get().first_token_event == "first_token"


def test_rules_are_appended_in_order(world: TeamWorld, stage: Stage, rule: SpanRule) -> None:
    client_for(world.owner).post(
        rule_url("rule_add", stage), rule_data(span_name="b*"), headers=HTMX
    )
    assert list(stage.rules.order_by("position").values_list("position", flat=True)) == [0, 1]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"span_name": "chat(", "name_match": "regex"}, "Invalid regular expression"),
        ({"span_name": "(a)\\1", "name_match": "regex"}, "backreferences are not supported"),
        ({"span_name": "(?=x)", "name_match": "regex"}, "lookahead assertions are not supported"),
        ({}, "A rule needs at least one condition"),
        ({"attributes": "just a line"}, "Line 1: write key=value"),
        ({"attributes": "a=1\n=2"}, "Line 2: write key=value"),
        ({"span_name": "x", "name_match": "fuzzy"}, "Select a valid choice"),
        ({"span_name": "x", "span_kind": "sideways"}, "Select a valid choice"),
        ({"span_name": "x", "portion": "middle"}, "Select a valid choice"),
        ({"span_name": "x" * 501}, "at most 500"),
        ({"span_name": "x", "first_token_event": "e" * 101}, "at most 100"),
    ],
)
def test_invalid_rule_input_comes_back_inline_and_nothing_is_saved(
    world: TeamWorld, stage: Stage, overrides: dict[str, str], message: str
) -> None:
    response = client_for(world.owner).post(
        rule_url("rule_add", stage), rule_data(**overrides), headers=HTMX
    )
    html = response.content.decode()
    assert response.status_code == 422
    assert message in html
    assert html.lstrip().startswith('<form class="rule-form"')
    assert not stage.rules.exists()


def test_viewer_gets_403_on_adding_a_rule(world: TeamWorld, stage: Stage) -> None:
    client = client_for(world.viewer)
    assert client.get(rule_url("rule_add", stage)).status_code == 403
    response = client.post(rule_url("rule_add", stage), rule_data(span_name="x"), headers=HTMX)
    assert response.status_code == 403
    assert not stage.rules.exists()


def test_outsider_gets_404_on_adding_a_rule(world: TeamWorld, stage: Stage) -> None:
    response = client_for(world.outsider).post(
        rule_url("rule_add", stage), rule_data(span_name="x")
    )
    assert response.status_code == 404
    assert not stage.rules.exists()


def test_anonymous_is_sent_to_login_when_adding_a_rule(world: TeamWorld, stage: Stage) -> None:
    response = Client().post(rule_url("rule_add", stage), rule_data(span_name="x"))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))
    assert not stage.rules.exists()


def test_adding_a_rule_to_another_teams_stage_is_404(
    world: TeamWorld, stage: Stage, foreign_rule: SpanRule
) -> None:
    url = reverse(
        "pipelines:rule_add",
        kwargs={
            "team_slug": "acme",
            "pipeline_slug": "rag-chat",
            "stage_id": foreign_rule.stage_id,
        },
    )
    response = client_for(world.owner).post(url, rule_data(span_name="x"))
    assert response.status_code == 404
    assert foreign_rule.stage.rules.count() == 1


# --- edit ---------------------------------------------------------------------


def test_htmx_edit_gets_the_rule_form_filled_in(
    world: TeamWorld, stage: Stage, rule: SpanRule
) -> None:
    response = client_for(world.owner).get(rule_url("rule_edit", stage, rule), headers=HTMX)
    html = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in html
    assert "gen_ai.operation.name=chat</textarea>" in html
    assert '<option value="until_first_token" selected>' in html


def test_plain_rule_edit_request_gets_a_full_page(
    world: TeamWorld, stage: Stage, rule: SpanRule
) -> None:
    response = client_for(world.owner).get(rule_url("rule_edit", stage, rule))
    assert response.status_code == 200
    assert "<html" in response.content.decode()


@pytest.mark.parametrize("role", ["owner", "editor"])
def test_writers_edit_a_rule(world: TeamWorld, stage: Stage, rule: SpanRule, role: str) -> None:
    response = client_for(getattr(world, role)).post(
        rule_url("rule_edit", stage, rule),
        rule_data(attributes="openinference.span.kind=LLM", portion="until_first_token"),
        headers=HTMX,
    )
    rule.refresh_from_db()
    assert response.status_code == 200
    assert rule.attributes == {"openinference.span.kind": "LLM"}


def test_editing_a_rule_to_an_invalid_regex_keeps_the_rule(
    world: TeamWorld, stage: Stage, rule: SpanRule
) -> None:
    response = client_for(world.owner).post(
        rule_url("rule_edit", stage, rule),
        rule_data(span_name="[unclosed", name_match="regex"),
        headers=HTMX,
    )
    rule.refresh_from_db()
    assert response.status_code == 422
    assert "Invalid regular expression" in response.content.decode()
    assert (rule.span_name, rule.attributes) == ("", {"gen_ai.operation.name": "chat"})


def test_viewer_gets_403_on_editing_a_rule(world: TeamWorld, stage: Stage, rule: SpanRule) -> None:
    response = client_for(world.viewer).post(
        rule_url("rule_edit", stage, rule), rule_data(span_name="x")
    )
    rule.refresh_from_db()
    assert response.status_code == 403
    assert rule.span_name == ""


def test_outsider_gets_404_on_editing_a_rule(
    world: TeamWorld, stage: Stage, rule: SpanRule
) -> None:
    response = client_for(world.outsider).post(
        rule_url("rule_edit", stage, rule), rule_data(span_name="x")
    )
    rule.refresh_from_db()
    assert response.status_code == 404
    assert rule.span_name == ""


def test_anonymous_is_sent_to_login_when_editing_a_rule(
    world: TeamWorld, stage: Stage, rule: SpanRule
) -> None:
    response = Client().get(rule_url("rule_edit", stage, rule))
    assert response.status_code == 302


def test_another_teams_rule_id_under_our_stage_is_404(
    world: TeamWorld, stage: Stage, foreign_rule: SpanRule
) -> None:
    client = client_for(world.owner)
    edit = rule_url("rule_edit", stage, foreign_rule)
    assert client.get(edit).status_code == 404
    assert client.post(edit, rule_data(span_name="stolen")).status_code == 404
    assert client.post(rule_url("rule_delete", stage, foreign_rule)).status_code == 404
    foreign_rule.refresh_from_db()
    assert foreign_rule.span_name == "secret*"


def test_a_rule_of_a_sibling_stage_is_404(world: TeamWorld, stage: Stage) -> None:
    sibling_rule = make_rule(make_stage(stage.pipeline, "generation"))
    response = client_for(world.owner).post(rule_url("rule_delete", stage, sibling_rule))
    assert response.status_code == 404
    assert SpanRule.objects.filter(pk=sibling_rule.pk).exists()


# --- delete -------------------------------------------------------------------


@pytest.mark.parametrize("role", ["owner", "editor"])
def test_writers_delete_a_rule(world: TeamWorld, stage: Stage, rule: SpanRule, role: str) -> None:
    response = client_for(getattr(world, role)).post(
        rule_url("rule_delete", stage, rule), headers=HTMX
    )
    assert response.status_code == 200
    assert not SpanRule.objects.filter(pk=rule.pk).exists()
    assert "No span rules" in response.content.decode()


def test_viewer_gets_403_on_deleting_a_rule(world: TeamWorld, stage: Stage, rule: SpanRule) -> None:
    assert client_for(world.viewer).post(rule_url("rule_delete", stage, rule)).status_code == 403
    assert SpanRule.objects.filter(pk=rule.pk).exists()


def test_outsider_gets_404_on_deleting_a_rule(
    world: TeamWorld, stage: Stage, rule: SpanRule
) -> None:
    assert client_for(world.outsider).post(rule_url("rule_delete", stage, rule)).status_code == 404
    assert SpanRule.objects.filter(pk=rule.pk).exists()


def test_anonymous_is_sent_to_login_when_deleting_a_rule(
    world: TeamWorld, stage: Stage, rule: SpanRule
) -> None:
    assert Client().post(rule_url("rule_delete", stage, rule)).status_code == 302
    assert SpanRule.objects.filter(pk=rule.pk).exists()
