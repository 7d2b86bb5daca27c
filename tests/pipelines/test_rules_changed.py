"""A pipeline remembers when what decides its stage samples last changed, by every door:
the pages, the REST API, a YAML apply and the presets; and only then."""

import io
import textwrap
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from apps.pipelines.models import Pipeline, SpanRule, Stage
from apps.pipelines.presets import pipeline_create_from_preset
from apps.pipelines.services import (
    pipeline_update,
    span_rule_update,
    stage_budgets_set,
    stage_create,
    stage_delete,
    stage_update,
    stages_reorder,
)
from tests.builders.api import ApiWorld, token_client
from tests.builders.configuration import make_pipeline, make_rule, make_stage
from tests.conftest import TeamWorld, client_for

HTMX = {"HX-Request": "true"}
LONG_AGO = timezone.now() - timedelta(days=3)


def changed_at(pipeline: Pipeline) -> datetime | None:
    return Pipeline.objects.values_list("rules_changed_at", flat=True).get(pk=pipeline.pk)


def settled(pipeline: Pipeline) -> Pipeline:
    """The pipeline as if its rules last changed days ago."""
    Pipeline.objects.filter(pk=pipeline.pk).update(rules_changed_at=LONG_AGO)
    pipeline.refresh_from_db()
    return pipeline


def just_now(pipeline: Pipeline) -> bool:
    moment = changed_at(pipeline)
    return moment is not None and timezone.now() - moment < timedelta(minutes=1)


@pytest.fixture
def rag(world: TeamWorld) -> tuple[Pipeline, Stage, Stage, SpanRule]:
    pipeline = make_pipeline(world.team, "rag-chat", match_root_span="POST /chat")
    retrieval = make_stage(pipeline, "retrieval")
    rule = make_rule(retrieval, span_name="retrieve*")
    generation = make_stage(pipeline, "generation")
    make_rule(generation, span_name="chat*")
    settled(pipeline)
    return pipeline, retrieval, generation, rule


# --- the services -----------------------------------------------------------------------


def test_a_new_pipeline_has_no_change_recorded_until_its_first_rule(world: TeamWorld) -> None:
    pipeline = make_pipeline(world.team, "bare")
    stage = make_stage(pipeline, "retrieval")
    assert changed_at(pipeline) is None  # a stage without rules takes no span
    make_rule(stage, span_name="retrieve*")
    assert just_now(pipeline)


def test_rule_changes_are_recorded_and_a_save_of_the_same_rule_is_not(rag: tuple) -> None:
    pipeline, _, _, rule = rag
    span_rule_update(rule=rule, span_name="retrieve*")  # as it was
    assert changed_at(pipeline) == LONG_AGO
    span_rule_update(rule=rule, attributes={"k": 1})
    assert just_now(pipeline)
    settled(pipeline)
    span_rule_update(rule=rule, attributes={"k": True})  # equal in Python, not as a rule value
    assert just_now(pipeline)


def test_stage_order_and_deletion_are_recorded_but_not_names_budgets_or_empty_stages(
    rag: tuple,
) -> None:
    pipeline, retrieval, generation, _ = rag
    stage_update(stage=retrieval, name="Vector search", budget_ms=120)
    stage_budgets_set(pipeline=pipeline, budgets_ms={generation.pk: 900})
    empty = stage_create(pipeline=pipeline, slug="tools", name="Tools")
    stages_reorder(pipeline=pipeline, ordered_ids=[retrieval.pk, generation.pk, empty.pk])
    stage_delete(stage=empty)
    assert changed_at(pipeline) == LONG_AGO

    stages_reorder(pipeline=pipeline, ordered_ids=[generation.pk, retrieval.pk])
    assert just_now(pipeline)
    settled(pipeline)
    stage_update(stage=Stage.objects.get(pk=retrieval.pk), position=0)
    assert just_now(pipeline)
    settled(pipeline)
    stage_delete(stage=Stage.objects.select_related("pipeline").get(pk=generation.pk))
    assert just_now(pipeline)


def test_the_root_match_is_recorded_and_a_stale_copy_never_turns_the_clock_back(
    rag: tuple,
) -> None:
    pipeline, _, _, rule = rag
    stale = Pipeline.objects.get(pk=pipeline.pk)
    pipeline_update(pipeline=pipeline, name="Renamed", budget={"p95": 3000})
    assert changed_at(pipeline) == LONG_AGO
    span_rule_update(rule=rule, span_name="search*")
    after_rule = changed_at(pipeline)
    pipeline_update(pipeline=stale, description="saved from a form opened before the change")
    assert changed_at(pipeline) == after_rule
    pipeline_update(pipeline=stale, match_root_span="POST /ask")
    moment = changed_at(pipeline)
    assert moment is not None
    assert after_rule is not None
    assert moment > after_rule


def test_a_preset_pipeline_is_created_with_its_rules_recorded(world: TeamWorld) -> None:
    pipeline = pipeline_create_from_preset(
        team=world.team, preset="rag-chat", slug="rag", name="RAG", budget={"p95": 3000}
    )
    assert just_now(pipeline)


# --- the doors ---------------------------------------------------------------------------


def test_the_stage_editor_pages_record_rule_changes(world: TeamWorld, rag: tuple) -> None:
    pipeline, retrieval, _, rule = rag
    client = client_for(world.editor)
    kwargs = {"team_slug": "acme", "pipeline_slug": pipeline.slug, "stage_id": retrieval.pk}
    data = {"span_name": "vector*", "name_match": "glob", "attributes": "", "span_kind": "",
            "service": "", "portion": "whole", "first_token_event": "first_token"}  # fmt: skip
    steps = [
        (reverse("pipelines:rule_add", kwargs=kwargs), data),
        (reverse("pipelines:rule_edit", kwargs={**kwargs, "rule_id": rule.pk}), data),
        (reverse("pipelines:rule_delete", kwargs={**kwargs, "rule_id": rule.pk}), {}),
        (reverse("pipelines:stage_move", kwargs=kwargs), {"direction": "down"}),
        (reverse("pipelines:stage_delete", kwargs=kwargs), {}),
    ]
    for url, body in steps:
        settled(pipeline)
        response = client.post(url, body, headers=HTMX)
        assert response.status_code == 200, url
        assert just_now(pipeline), url
        # The editor says so where the change was made, and where to recompute.
        html = response.content.decode()
        assert 'data-role="rules-changed"' in html
        assert 'href="/teams/acme/dashboards/rag-chat/#recompute"' in html


def test_the_rest_api_records_rule_changes(api: ApiWorld) -> None:
    client = token_client(api.world.editor)
    base = "/api/v1/pipelines/rag-chat/"
    rules = base + "stages/retrieval/rules/"
    calls = [
        lambda: client.post(rules, {"span_name": "vector*"}, format="json"),
        lambda: client.patch(f"{rules}{api.rule.pk}/", {"service": "vectors"}, format="json"),
        lambda: client.delete(f"{rules}{api.rule.pk}/"),
        lambda: client.post(
            base + "stages/reorder/", {"order": ["generation", "retrieval"]}, format="json"
        ),
        lambda: client.patch(base, {"match": {"root_span": "POST /ask"}}, format="json"),
    ]
    for call in calls:
        settled(api.pipeline)
        response = call()
        assert response.status_code in (200, 201, 204), response.content
        assert just_now(api.pipeline)
    settled(api.pipeline)
    client.patch(base, {"budget": {"p95": 9000}}, format="json")
    assert changed_at(api.pipeline) == LONG_AGO
    assert changed_at(api.other_pipeline) is not None  # globex's own, from its creation
    assert changed_at(api.other_pipeline) != changed_at(api.pipeline)


DOCUMENT = """\
team: acme
pipelines:
  - slug: rag-chat
    name: Rag Chat
    match: {root_span: "POST /chat"}
    budget: {p95: 2500}
    stages:
      - slug: retrieval
        name: Retrieval
        budget: {p95: 300}
        match:
          - {span_name: "RETRIEVAL_RULE"}
      - slug: generation
        name: Generation
        budget: {p95: 300}
        match:
          - {span_name: "chat*"}
"""


def test_a_yaml_apply_records_rule_changes_and_an_unchanged_file_does_not(
    rag: tuple, tmp_path: Path
) -> None:
    pipeline = rag[0]
    path = tmp_path / "budgets.yaml"

    def apply(rule: str) -> None:
        path.write_text(textwrap.dedent(DOCUMENT.replace("RETRIEVAL_RULE", rule)))
        call_command("budgets", "apply", str(path), stdout=io.StringIO(), stderr=io.StringIO())

    apply("retrieve*")  # what the database holds already
    assert changed_at(pipeline) == LONG_AGO
    apply("vector.search*")
    assert just_now(pipeline)
    assert SpanRule.objects.filter(stage__pipeline=pipeline, span_name="vector.search*").exists()
