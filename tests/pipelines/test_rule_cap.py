"""A pipeline holds at most PIPELINE_MAX_RULES rules, its stages' and its no-stage rules
together, whichever door they come through: each is tried on every span of its traces."""

import threading

import pytest
from django.core.exceptions import ValidationError
from django.db import connection

from apps.pipelines.config_as_code import ConfigInvalid, config_apply, parse_document
from apps.pipelines.models import NoStageRule, Pipeline, SpanRule
from apps.pipelines.services import no_stage_rule_create, span_rule_create
from tests.builders.api import token_client
from tests.builders.configuration import make_no_stage_rule, make_pipeline, make_rule, make_stage
from tests.conftest import TeamWorld, client_for

CAP = 3


@pytest.fixture(autouse=True)
def _small_cap(settings) -> None:
    settings.PIPELINE_MAX_RULES = CAP


@pytest.fixture
def full(world: TeamWorld) -> Pipeline:
    """A pipeline at the cap: two stage rules and a no-stage rule."""
    pipeline = make_pipeline(world.team, "rag-chat")
    make_rule(make_stage(pipeline, "retrieval"), span_name="retrieval")
    make_rule(make_stage(pipeline, "rerank"), span_name="rerank")
    make_no_stage_rule(pipeline, span_name="cache flush")
    return pipeline


def count(pipeline: Pipeline) -> int:
    return (
        SpanRule.objects.filter(stage__pipeline=pipeline).count()
        + NoStageRule.objects.filter(pipeline=pipeline).count()
    )


def test_both_kinds_of_rule_count_against_one_cap(full: Pipeline) -> None:
    with pytest.raises(ValidationError, match="PIPELINE_MAX_RULES=3") as caught:
        span_rule_create(stage=full.stages.get(slug="rerank"), span_name="x")
    assert caught.value.code == "too_many_rules"
    with pytest.raises(ValidationError, match="already has 3 span rules"):
        no_stage_rule_create(pipeline=full, span_name="x")
    assert count(full) == CAP


def test_each_pipeline_has_its_own_cap(world: TeamWorld, full: Pipeline) -> None:
    other = make_pipeline(world.team, "search")
    for n in range(CAP):
        make_no_stage_rule(other, span_name=f"n{n}")
    assert count(other) == CAP


def test_a_rule_deleted_makes_room(full: Pipeline) -> None:
    NoStageRule.objects.filter(pipeline=full).delete()
    no_stage_rule_create(pipeline=full, span_name="flush")
    assert count(full) == CAP


def test_zero_turns_the_cap_off(settings, full: Pipeline) -> None:
    settings.PIPELINE_MAX_RULES = 0
    no_stage_rule_create(pipeline=full, span_name="x")
    assert count(full) == CAP + 1


def test_every_door_refuses_the_rule_past_the_cap_and_names_the_setting(
    world: TeamWorld, full: Pipeline
) -> None:
    stage = full.stages.get(slug="rerank")
    page = client_for(world.editor).post(
        "/teams/acme/pipelines/rag-chat/no-stage-rules/new/",
        {"span_name": "x", "name_match": "glob"},
        headers={"HX-Request": "true"},
    )
    stage_page = client_for(world.editor).post(
        f"/teams/acme/pipelines/rag-chat/stages/{stage.pk}/rules/new/",
        {"span_name": "x", "name_match": "glob", "portion": "whole"},
        headers={"HX-Request": "true"},
    )
    api = token_client(world.editor).post(
        "/api/v1/pipelines/rag-chat/no-stage-rules/", {"span_name": "x"}, format="json"
    )
    assert page.status_code == 422
    assert "PIPELINE_MAX_RULES=3" in page.content.decode()
    assert stage_page.status_code == 422
    assert "PIPELINE_MAX_RULES=3" in stage_page.content.decode()
    assert api.status_code == 400
    assert "PIPELINE_MAX_RULES=3" in str(api.json())
    assert count(full) == CAP


FILE = """\
team: acme
pipelines:
  - slug: rag-chat
    name: RAG
    budget: {p95: 2500}
    stages:
      - slug: retrieval
        name: Retrieval
        match: [{span_name: retrieval}, {span_name: vector*}]
    no_stage: [{span_name: a}, {span_name: b}]
"""


def test_a_file_with_more_rules_than_the_cap_is_refused_before_anything_is_applied(
    world: TeamWorld,
) -> None:
    with pytest.raises(ConfigInvalid) as caught:
        parse_document(FILE)
    assert [(e.line, e.message) for e in caught.value.errors] == [
        (
            3,
            "This pipeline has 4 span rules (its stages' and its no-stage rules together), "
            "more than a pipeline may have (PIPELINE_MAX_RULES=3).",
        )
    ]
    assert not Pipeline.objects.filter(team=world.team).exists()


def test_a_file_may_trade_no_stage_rules_for_stage_rules_at_the_cap(full: Pipeline) -> None:
    traded = FILE.replace("    no_stage: [{span_name: a}, {span_name: b}]\n", "")
    traded = traded.replace(
        "      - slug: retrieval\n",
        "      - slug: rerank\n        name: Rerank\n      - slug: retrieval\n",
    )
    traded = traded.replace("{span_name: vector*}]", "{span_name: vector*}, {span_name: v2*}]")
    config_apply(document=parse_document(traded))
    assert count(full) == CAP
    assert not full.no_stage_rules.exists()

    # … and back: the stage rules go before the no-stage rules come.
    back = FILE.replace("{span_name: retrieval}, {span_name: vector*}", "{span_name: retrieval}")
    config_apply(document=parse_document(back))
    assert count(full) == CAP
    assert [r.span_name for r in full.no_stage_rules.order_by("position")] == ["a", "b"]


@pytest.mark.django_db(transaction=True)
def test_two_requests_racing_for_the_last_place_get_one_rule(world: TeamWorld) -> None:
    pipeline = make_pipeline(world.team, "race")
    make_no_stage_rule(pipeline, span_name="one")
    make_no_stage_rule(pipeline, span_name="two")
    results: list[str] = []
    barrier = threading.Barrier(2)

    def add(name: str) -> None:
        try:
            barrier.wait()
            no_stage_rule_create(pipeline=Pipeline.objects.get(pk=pipeline.pk), span_name=name)
            results.append("created")
        except ValidationError:
            results.append("refused")
        finally:
            connection.close()

    threads = [threading.Thread(target=add, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(results) == ["created", "refused"]
    assert count(pipeline) == CAP
