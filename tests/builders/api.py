"""The API tests' world and clients: a configured pipeline in acme and its namesake in
globex (the ``api`` fixture), clients by token or session, and the error body."""

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rest_framework.test import APIClient

from apps.pipelines.models import NoStageRule, Pipeline, SpanRule, Stage
from apps.teams.services import api_token_create
from tests.builders.configuration import make_no_stage_rule, make_pipeline, make_rule, make_stage

if TYPE_CHECKING:
    from tests.conftest import TeamWorld


@dataclass
class ApiWorld:
    """``world`` plus a configured pipeline in acme and one of the same slug in globex."""

    world: "TeamWorld"
    pipeline: Pipeline
    retrieval: Stage
    generation: Stage
    rule: SpanRule
    other_pipeline: Pipeline
    other_stage: Stage
    other_rule: SpanRule
    no_stage_rule: NoStageRule
    other_no_stage_rule: NoStageRule


def api_world(world: "TeamWorld") -> ApiWorld:
    pipeline = make_pipeline(
        world.team,
        "rag-chat",
        name="RAG chat answer",
        budget={"p95": 2500, "p99": 4000},
        match_service="chat-api",
        match_root_span="POST /chat",
    )
    retrieval = make_stage(pipeline, "retrieval", budget_ms=400)
    generation = make_stage(pipeline, "generation", budget_ms=1500, budget_percentile="p99")
    rule = make_rule(retrieval, attributes={"openinference.span.kind": "RETRIEVER"})
    make_rule(generation, span_name="chat *")
    other = make_pipeline(world.other_team, "rag-chat", name="Globex chat")
    other_stage = make_stage(other, "retrieval")
    other_rule = make_rule(other_stage, span_name="search")
    no_stage_rule = make_no_stage_rule(pipeline, span_name="cache flush")
    other_no_stage_rule = make_no_stage_rule(other, span_name="secret flush")
    return ApiWorld(
        world,
        pipeline,
        retrieval,
        generation,
        rule,
        other,
        other_stage,
        other_rule,
        no_stage_rule,
        other_no_stage_rule,
    )


def token_client(user: Any) -> APIClient:
    _, raw = api_token_create(user=user, name="tests")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


def session_client(user: Any) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client


def db_state() -> tuple[list[Any], ...]:
    """Every configuration row, to show that a refused request changed nothing."""
    return (
        list(Pipeline.objects.order_by("id").values()),
        list(Stage.objects.order_by("id").values()),
        list(SpanRule.objects.order_by("id").values()),
        list(NoStageRule.objects.order_by("id").values()),
    )


def error_of(response: Any) -> dict[str, Any]:
    body = response.json()
    assert set(body) == {"error"}
    return body["error"]
