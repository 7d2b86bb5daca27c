"""No-stage rules on the pipeline editor: listed for every member, written by owners and
editors, checked as a stage's span rules are, and out of reach of other teams."""

from typing import Any

import pytest
from django.urls import reverse

from apps.pipelines.models import NoStageRule, Pipeline
from tests.builders.configuration import make_no_stage_rule, make_pipeline, make_rule, make_stage
from tests.conftest import TeamWorld, client_for

pytestmark = pytest.mark.django_db
HTMX = {"HX-Request": "true"}


@pytest.fixture
def pipeline(world: TeamWorld) -> Pipeline:
    pipeline = make_pipeline(world.team, "rag-chat")
    make_rule(make_stage(pipeline, "retrieval"), span_name="retrieval")
    return pipeline


@pytest.fixture
def rule(pipeline: Pipeline) -> NoStageRule:
    return make_no_stage_rule(pipeline, span_name="cache flush")


@pytest.fixture
def foreign_rule(world: TeamWorld) -> NoStageRule:
    return make_no_stage_rule(make_pipeline(world.other_team, "rag-chat"), span_name="secret*")


def url(name: str, pipeline: Pipeline, rule: NoStageRule | None = None) -> str:
    kwargs: dict[str, Any] = {"team_slug": pipeline.team.slug, "pipeline_slug": pipeline.slug}
    if rule is not None:
        kwargs["rule_id"] = rule.id
    return reverse(f"pipelines:{name}", kwargs=kwargs)


def rule_data(**overrides: str) -> dict[str, str]:
    data = {"span_name": "", "name_match": "glob", "attributes": "", "span_kind": "", "service": ""}
    data.update(overrides)
    return data


def test_the_editor_lists_no_stage_rules_and_explains_them(
    world: TeamWorld, pipeline: Pipeline, rule: NoStageRule
) -> None:
    html = client_for(world.editor).get(url("detail", pipeline)).content.decode()
    assert 'id="no-stage-rules"' in html
    assert f'id="no-stage-rule-{rule.id}"' in html
    assert "<code>name = cache flush</code>" in html
    assert "counts in the stage of the nearest span above it" in html
    assert url("no_stage_rule_add", pipeline) in html
    assert url("no_stage_rule_edit", pipeline, rule) in html


def test_a_viewer_sees_the_rules_without_a_way_to_change_them(
    world: TeamWorld, pipeline: Pipeline, rule: NoStageRule
) -> None:
    html = client_for(world.viewer).get(url("detail", pipeline)).content.decode()
    assert "<code>name = cache flush</code>" in html
    assert url("no_stage_rule_add", pipeline) not in html
    assert url("no_stage_rule_edit", pipeline, rule) not in html
    assert url("no_stage_rule_delete", pipeline, rule) not in html


def test_the_blank_form_has_only_conditions_and_a_live_tester(
    world: TeamWorld, pipeline: Pipeline
) -> None:
    response = client_for(world.editor).get(url("no_stage_rule_add", pipeline), headers=HTMX)
    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith('<form class="rule-form no-stage-rule-form"')
    assert 'name="span_name"' in html
    assert 'name="attributes"' in html
    assert 'name="portion"' not in html
    assert 'name="first_token_event"' not in html
    assert (
        reverse(
            "dashboards:no_stage_rule_test",
            kwargs={"team_slug": "acme", "pipeline_slug": pipeline.slug},
        )
        in html
    )


@pytest.mark.parametrize("role", ["owner", "editor"])
def test_writers_add_a_no_stage_rule_after_the_last(
    world: TeamWorld, pipeline: Pipeline, rule: NoStageRule, role: str
) -> None:
    data = rule_data(
        span_name="^cache\\.(flush|warm)$",
        name_match="regex",
        attributes="background=true\nattempt=2",
        span_kind="internal",
        service="cache",
    )
    response = client_for(getattr(world, role)).post(
        url("no_stage_rule_add", pipeline), data, headers=HTMX
    )
    added = pipeline.no_stage_rules.exclude(pk=rule.pk).get()
    assert response.status_code == 200
    assert response["HX-Retarget"] == "#stage-editor"
    assert (added.span_name, added.name_match) == ("^cache\\.(flush|warm)$", "regex")
    assert added.attributes == {"background": True, "attempt": 2}
    assert (added.span_kind, added.service, added.position) == ("internal", "cache", 1)
    assert f'id="no-stage-rule-{added.id}"' in response.content.decode()


def test_without_htmx_adding_redirects_to_the_pipeline(world: TeamWorld, pipeline: Pipeline):
    response = client_for(world.owner).post(
        url("no_stage_rule_add", pipeline), rule_data(span_name="cache flush")
    )
    assert response.status_code == 302
    assert response["Location"] == url("detail", pipeline)
    assert pipeline.no_stage_rules.count() == 1


# The same wording as a stage's span rule: one validator for both.
@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"span_name": "chat(", "name_match": "regex"}, "Invalid regular expression"),
        ({"span_name": "(a)\\1", "name_match": "regex"}, "backreferences are not supported"),
        ({"span_name": "?" * 200}, "Invalid glob"),
        ({}, "A rule needs at least one condition"),
        ({"attributes": "just a line"}, "Line 1: write key=value"),
        ({"attributes": "a=x\x00"}, "Null characters are not allowed"),
        ({"span_name": "x", "name_match": "fuzzy"}, "Select a valid choice"),
        ({"span_name": "x", "span_kind": "sideways"}, "Select a valid choice"),
        ({"span_name": "x" * 501}, "at most 500"),
        ({"service": "s" * 201}, "at most 200"),
    ],
)
def test_invalid_input_comes_back_inline_and_nothing_is_saved(
    world: TeamWorld, pipeline: Pipeline, overrides: dict[str, str], message: str
) -> None:
    response = client_for(world.owner).post(
        url("no_stage_rule_add", pipeline), rule_data(**overrides), headers=HTMX
    )
    html = response.content.decode()
    assert response.status_code == 422
    assert message in html
    assert html.lstrip().startswith('<form class="rule-form no-stage-rule-form"')
    assert not pipeline.no_stage_rules.exists()


def test_a_portion_sent_anyway_is_ignored(world: TeamWorld, pipeline: Pipeline) -> None:
    client_for(world.owner).post(
        url("no_stage_rule_add", pipeline),
        rule_data(span_name="flush", portion="after_first_token"),
        headers=HTMX,
    )
    assert pipeline.no_stage_rules.get().span_name == "flush"


def test_editing_changes_the_rule_in_place(
    world: TeamWorld, pipeline: Pipeline, rule: NoStageRule
) -> None:
    client = client_for(world.editor)
    form = client.get(url("no_stage_rule_edit", pipeline, rule), headers=HTMX).content.decode()
    assert 'value="cache flush"' in form
    response = client.post(
        url("no_stage_rule_edit", pipeline, rule),
        rule_data(span_name="cache *", service="worker"),
        headers=HTMX,
    )
    rule.refresh_from_db()
    assert response.status_code == 200
    assert (rule.span_name, rule.service, rule.position) == ("cache *", "worker", 0)


def test_an_invalid_edit_leaves_the_rule_as_it_was(
    world: TeamWorld, pipeline: Pipeline, rule: NoStageRule
) -> None:
    response = client_for(world.owner).post(
        url("no_stage_rule_edit", pipeline, rule), rule_data(), headers=HTMX
    )
    rule.refresh_from_db()
    assert response.status_code == 422
    assert rule.span_name == "cache flush"


def test_deleting_removes_only_that_rule(
    world: TeamWorld, pipeline: Pipeline, rule: NoStageRule
) -> None:
    other = make_no_stage_rule(pipeline, service="cron")
    response = client_for(world.owner).post(url("no_stage_rule_delete", pipeline, rule))
    assert response.status_code == 302
    assert list(pipeline.no_stage_rules.all()) == [other]


def test_a_viewer_gets_403_on_every_write(
    world: TeamWorld, pipeline: Pipeline, rule: NoStageRule
) -> None:
    client = client_for(world.viewer)
    assert client.get(url("no_stage_rule_add", pipeline)).status_code == 403
    assert (
        client.post(url("no_stage_rule_add", pipeline), rule_data(span_name="x")).status_code == 403
    )
    assert (
        client.post(url("no_stage_rule_edit", pipeline, rule), rule_data(span_name="x")).status_code
        == 403
    )
    assert client.post(url("no_stage_rule_delete", pipeline, rule)).status_code == 403
    rule.refresh_from_db()
    assert rule.span_name == "cache flush"
    assert pipeline.no_stage_rules.count() == 1


def test_an_outsider_gets_404_and_changes_nothing(
    world: TeamWorld, pipeline: Pipeline, rule: NoStageRule
) -> None:
    client = client_for(world.outsider)
    assert client.get(url("no_stage_rule_add", pipeline)).status_code == 404
    assert (
        client.post(url("no_stage_rule_add", pipeline), rule_data(span_name="x")).status_code == 404
    )
    assert (
        client.post(url("no_stage_rule_edit", pipeline, rule), rule_data(span_name="x")).status_code
        == 404
    )
    assert client.post(url("no_stage_rule_delete", pipeline, rule)).status_code == 404
    assert list(pipeline.no_stage_rules.values_list("span_name", flat=True)) == ["cache flush"]


def test_another_team_s_rule_id_under_one_s_own_pipeline_is_a_404(
    world: TeamWorld, pipeline: Pipeline, foreign_rule: NoStageRule
) -> None:
    client = client_for(world.owner)
    assert client.get(url("no_stage_rule_edit", pipeline, foreign_rule)).status_code == 404
    assert client.post(url("no_stage_rule_delete", pipeline, foreign_rule)).status_code == 404
    assert NoStageRule.objects.filter(pk=foreign_rule.pk).exists()


def test_a_rule_of_another_pipeline_of_the_same_team_is_a_404(
    world: TeamWorld, pipeline: Pipeline
) -> None:
    elsewhere = make_no_stage_rule(make_pipeline(world.team, "search"), span_name="x")
    client = client_for(world.owner)
    assert client.post(url("no_stage_rule_delete", pipeline, elsewhere)).status_code == 404
    assert NoStageRule.objects.filter(pk=elsewhere.pk).exists()


def test_anonymous_visitors_are_sent_to_sign_in(pipeline: Pipeline, rule: NoStageRule) -> None:
    from django.test import Client

    response = Client().post(url("no_stage_rule_delete", pipeline, rule))
    assert response.status_code == 302
    assert "/accounts/login/" in response["Location"]
    assert NoStageRule.objects.filter(pk=rule.pk).exists()
