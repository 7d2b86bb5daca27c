from decimal import Decimal

import pytest
import yaml
from django.test import Client

from apps.pipelines.models import Pipeline
from tests.builders.api import ApiWorld, db_state, error_of, token_client
from tests.builders.configuration import make_pipeline

LIST = "/api/v1/pipelines/"
DETAIL = LIST + "rag-chat/"


def test_the_list_shows_summaries_without_stages(api: ApiWorld):
    body = token_client(api.world.viewer).get(LIST).json()
    assert body["count"] == 1
    assert body["previous"] is None
    assert body["next"] is None
    (item,) = body["results"]
    assert item["slug"] == "rag-chat"
    assert item["stage_count"] == 2
    assert item["budget"] == {"p95": 2500, "p99": 4000}
    assert item["match"] == {"service": "chat-api", "root_span": "POST /chat", "attributes": {}}
    assert item["objective"] is None
    assert "stages" not in item


def test_the_detail_nests_stages_in_order_with_their_rules(api: ApiWorld):
    body = token_client(api.world.viewer).get(DETAIL).json()
    assert [s["slug"] for s in body["stages"]] == ["retrieval", "generation"]
    retrieval, generation = body["stages"]
    assert retrieval["budget"] == {"p95": 400}
    assert generation["budget"] == {"p99": 1500}
    assert retrieval["rules"][0]["attributes"] == {"openinference.span.kind": "RETRIEVER"}
    assert generation["rules"][0]["span_name"] == "chat *"


def test_create_stores_every_field_and_returns_201(api: ApiWorld):
    payload = {
        "slug": "agent",
        "name": "Support agent",
        "description": "Tool-using agent",
        "match": {"service": "agent", "root_span": "invoke_agent *", "attributes": {"tier": 1}},
        "budget": {"p50": 3000, "p95": 8000},
        "objective": {"target": 99.5, "threshold_ms": 10000},
    }
    response = token_client(api.world.editor).post(LIST, payload, format="json")
    assert response.status_code == 201
    body = response.json()
    assert body["objective"] == {"target": 99.5, "threshold_ms": 10000}
    assert body["stages"] == []
    pipeline = Pipeline.objects.get(team=api.world.team, slug="agent")
    assert pipeline.budget == {"p50": 3000, "p95": 8000}
    assert pipeline.match_attributes == {"tier": 1}
    assert pipeline.match_root_span == "invoke_agent *"
    assert pipeline.objective_target == Decimal("99.5")
    assert pipeline.objective_threshold_ms == 10000


def test_the_same_slug_may_exist_in_another_team(api: ApiWorld):
    response = token_client(api.world.outsider).post(
        LIST, {"slug": "agent", "name": "A", "budget": {"p95": 1}}, format="json"
    )
    assert response.status_code == 201
    assert Pipeline.objects.get(slug="agent").team == api.world.other_team


INVALID = [
    ({"budget": {"p95": 0}}, "budget"),
    ({"budget": {"p95": -5}}, "budget"),
    ({"budget": {"p95": 12.5}}, "budget"),
    ({"budget": {"p95": 3_600_001}}, "budget"),
    ({"budget": {"p97": 100}}, "budget"),
    ({"budget": {}}, "budget"),
    ({"budget": "fast"}, "budget"),
    ({"slug": "rag-chat"}, "slug"),
    ({"slug": "Not A Slug"}, "slug"),
    ({"name": ""}, "name"),
    ({"objective": {"target": 99}}, "objective.threshold_ms"),
    ({"objective": {"threshold_ms": 4000}}, "objective.target"),
    ({"objective": {"target": 100, "threshold_ms": 4000}}, "objective.target"),
    ({"match": {"attributes": {"k": None}}}, "match.attributes"),
    ({"match": {"attributes": ["a"]}}, "match.attributes"),
]


@pytest.mark.parametrize(("change", "field"), INVALID)
def test_create_rejects_invalid_input_and_writes_nothing(api: ApiWorld, change, field):
    payload = {"slug": "agent", "name": "Agent", "budget": {"p95": 8000}, **change}
    before = db_state()
    response = token_client(api.world.owner).post(LIST, payload, format="json")
    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == "invalid"
    assert field in error["fields"], error
    assert db_state() == before


def test_create_names_every_missing_required_field(api: ApiWorld):
    response = token_client(api.world.owner).post(LIST, {}, format="json")
    assert set(error_of(response)["fields"]) == {"slug", "name", "budget"}


def test_patch_changes_only_the_fields_sent(api: ApiWorld):
    response = token_client(api.world.editor).patch(
        DETAIL, {"match": {"service": "chat-v2"}, "budget": {"p90": 1800}}, format="json"
    )
    assert response.status_code == 200
    api.pipeline.refresh_from_db()
    assert api.pipeline.match_service == "chat-v2"
    assert api.pipeline.match_root_span == "POST /chat"
    assert api.pipeline.name == "RAG chat answer"
    # A budget is replaced as a whole.
    assert api.pipeline.budget == {"p90": 1800}
    assert response.json()["budget"] == {"p90": 1800}


def test_patch_sets_and_clears_the_objective(api: ApiWorld):
    client = token_client(api.world.editor)
    client.patch(DETAIL, {"objective": {"target": 99, "threshold_ms": 4000}}, format="json")
    api.pipeline.refresh_from_db()
    assert api.pipeline.objective_threshold_ms == 4000
    response = client.patch(DETAIL, {"objective": None}, format="json")
    assert response.json()["objective"] is None
    api.pipeline.refresh_from_db()
    assert api.pipeline.objective_target is None
    assert api.pipeline.objective_threshold_ms is None


def test_patch_refuses_half_an_objective(api: ApiWorld):
    before = db_state()
    response = token_client(api.world.editor).patch(
        DETAIL, {"objective": {"target": 99}}, format="json"
    )
    assert response.status_code == 400
    assert "objective.target" in error_of(response)["fields"]
    assert db_state() == before


def test_patch_to_a_slug_in_use_is_refused(api: ApiWorld):
    make_pipeline(api.world.team, "search")
    before = db_state()
    response = token_client(api.world.owner).patch(DETAIL, {"slug": "search"}, format="json")
    assert response.status_code == 400
    assert error_of(response)["fields"]["slug"] == [
        "This team already has a pipeline with this slug."
    ]
    assert db_state() == before


def test_patch_may_rename_the_slug(api: ApiWorld):
    client = token_client(api.world.owner)
    assert client.patch(DETAIL, {"slug": "chat"}, format="json").status_code == 200
    assert client.get(DETAIL).status_code == 404
    assert client.get(LIST + "chat/").json()["name"] == "RAG chat answer"


def test_put_resets_what_it_leaves_out(api: ApiWorld):
    api.pipeline.description = "old"
    api.pipeline.save()
    response = token_client(api.world.owner).put(
        DETAIL, {"slug": "rag-chat", "name": "RAG", "budget": {"p50": 900}}, format="json"
    )
    assert response.status_code == 200
    api.pipeline.refresh_from_db()
    assert api.pipeline.name == "RAG"
    assert api.pipeline.description == ""
    assert api.pipeline.match_service == ""
    assert api.pipeline.budget == {"p50": 900}


def test_put_needs_the_required_fields(api: ApiWorld):
    before = db_state()
    response = token_client(api.world.owner).put(DETAIL, {"name": "RAG"}, format="json")
    assert response.status_code == 400
    assert set(error_of(response)["fields"]) == {"slug", "budget"}
    assert db_state() == before


def test_delete_removes_the_pipeline_with_stages_and_rules(api: ApiWorld):
    response = token_client(api.world.owner).delete(DETAIL)
    assert response.status_code == 204
    assert not Pipeline.objects.filter(pk=api.pipeline.pk).exists()
    assert not api.pipeline.stages.exists()
    assert Pipeline.objects.filter(pk=api.other_pipeline.pk).exists()


# --- Pagination and filtering ---------------------------------------------------------


@pytest.fixture
def many(api: ApiWorld) -> None:
    for index in range(12):
        make_pipeline(api.world.team, f"p-{index:02}", name=f"Batch {index:02}")
    make_pipeline(api.world.team, "search-answer", name="Search answer")


def test_pages_follow_page_and_page_size(api: ApiWorld, many):
    client = token_client(api.world.viewer)
    first = client.get(LIST, {"page_size": 5}).json()
    assert first["count"] == 14
    assert len(first["results"]) == 5
    assert "page=2" in first["next"]
    third = client.get(LIST, {"page_size": 5, "page": 3}).json()
    assert len(third["results"]) == 4
    assert third["next"] is None
    names = [p["name"] for p in first["results"]]
    assert names == sorted(names)


def test_a_page_past_the_end_is_404(api: ApiWorld, many):
    response = token_client(api.world.viewer).get(LIST, {"page": 99})
    assert response.status_code == 404
    assert error_of(response)["code"] == "not_found"


def test_page_size_is_capped(api: ApiWorld, many):
    body = token_client(api.world.viewer).get(LIST, {"page_size": 100_000}).json()
    assert len(body["results"]) == 14


def test_search_matches_name_or_slug(api: ApiWorld, many):
    client = token_client(api.world.viewer)
    by_name = client.get(LIST, {"search": "ANSWER"}).json()["results"]
    assert {p["slug"] for p in by_name} == {"rag-chat", "search-answer"}
    by_slug = client.get(LIST, {"search": "p-1"}).json()["results"]
    assert {p["slug"] for p in by_slug} == {"p-10", "p-11"}


def test_the_list_never_shows_another_teams_pipelines(api: ApiWorld):
    body = token_client(api.world.owner).get(LIST, {"search": "globex"}).json()
    assert body["count"] == 0


# --- Budget evaluation settings ---------------------------------------------------------

DEFAULT_EVALUATION = {"window_s": 300, "min_samples": 20, "close_after": 3}


def evaluation_in_db(pipeline: Pipeline) -> tuple[int, int, int]:
    pipeline.refresh_from_db()
    return pipeline.evaluation_window_s, pipeline.min_samples, pipeline.close_after


def test_the_list_and_detail_show_the_evaluation_settings(api: ApiWorld):
    client = token_client(api.world.viewer)
    (item,) = client.get(LIST).json()["results"]
    assert item["evaluation"] == DEFAULT_EVALUATION
    Pipeline.objects.filter(pk=api.pipeline.pk).update(
        evaluation_window_s=900, min_samples=50, close_after=6
    )
    body = client.get(DETAIL).json()
    assert body["evaluation"] == {"window_s": 900, "min_samples": 50, "close_after": 6}


def test_create_stores_the_evaluation_settings(api: ApiWorld):
    payload = {
        "slug": "agent",
        "name": "Agent",
        "budget": {"p95": 8000},
        "evaluation": {"window_s": 600, "min_samples": 100, "close_after": 10},
    }
    response = token_client(api.world.editor).post(LIST, payload, format="json")
    assert response.status_code == 201
    assert response.json()["evaluation"] == payload["evaluation"]
    pipeline = Pipeline.objects.get(team=api.world.team, slug="agent")
    assert evaluation_in_db(pipeline) == (600, 100, 10)


def test_create_gives_left_out_evaluation_keys_their_defaults(api: ApiWorld):
    payload = {"slug": "agent", "name": "A", "budget": {"p95": 1}, "evaluation": {"window_s": 60}}
    response = token_client(api.world.owner).post(LIST, payload, format="json")
    assert response.json()["evaluation"] == {**DEFAULT_EVALUATION, "window_s": 60}
    assert evaluation_in_db(Pipeline.objects.get(slug="agent")) == (60, 20, 3)


def test_create_without_evaluation_uses_the_defaults(api: ApiWorld):
    payload = {"slug": "agent", "name": "A", "budget": {"p95": 1}}
    response = token_client(api.world.owner).post(LIST, payload, format="json")
    assert response.json()["evaluation"] == DEFAULT_EVALUATION
    assert evaluation_in_db(Pipeline.objects.get(slug="agent")) == (300, 20, 3)


@pytest.mark.parametrize("role", ["owner", "editor"])
def test_patch_merges_evaluation_keys(api: ApiWorld, role: str):
    client = token_client(getattr(api.world, role))
    client.patch(DETAIL, {"evaluation": {"min_samples": 50, "close_after": 6}}, format="json")
    response = client.patch(DETAIL, {"evaluation": {"window_s": 1200}}, format="json")
    assert response.status_code == 200
    assert response.json()["evaluation"] == {"window_s": 1200, "min_samples": 50, "close_after": 6}
    assert evaluation_in_db(api.pipeline) == (1200, 50, 6)


def test_patch_without_evaluation_leaves_it_alone(api: ApiWorld):
    Pipeline.objects.filter(pk=api.pipeline.pk).update(evaluation_window_s=900, close_after=6)
    response = token_client(api.world.owner).patch(DETAIL, {"name": "Renamed"}, format="json")
    assert response.status_code == 200
    assert evaluation_in_db(api.pipeline) == (900, 20, 6)


def test_put_resets_the_evaluation_keys_it_leaves_out(api: ApiWorld):
    Pipeline.objects.filter(pk=api.pipeline.pk).update(
        evaluation_window_s=900, min_samples=50, close_after=6
    )
    client = token_client(api.world.owner)
    body = {"slug": "rag-chat", "name": "RAG", "budget": {"p95": 2500}}
    response = client.put(DETAIL, {**body, "evaluation": {"close_after": 9}}, format="json")
    assert response.status_code == 200
    assert evaluation_in_db(api.pipeline) == (300, 20, 9)
    assert client.put(DETAIL, body, format="json").status_code == 200
    assert evaluation_in_db(api.pipeline) == (300, 20, 3)


INVALID_EVALUATION = [
    ({"window_s": 59}, "evaluation.window_s"),
    ({"window_s": 3601}, "evaluation.window_s"),
    ({"window_s": 300.5}, "evaluation.window_s"),
    ({"window_s": "soon"}, "evaluation.window_s"),
    ({"window_s": True}, "evaluation.window_s"),
    ({"window_s": None}, "evaluation.window_s"),
    ({"window_s": 10**30}, "evaluation.window_s"),
    ({"min_samples": 0}, "evaluation.min_samples"),
    ({"min_samples": 100_001}, "evaluation.min_samples"),
    ({"close_after": 0}, "evaluation.close_after"),
    ({"close_after": 361}, "evaluation.close_after"),
    ({"close_after": -1}, "evaluation.close_after"),
    ({"window": 600}, "evaluation.window"),
]


@pytest.mark.parametrize(("evaluation", "field"), INVALID_EVALUATION)
def test_create_rejects_invalid_evaluation_settings_and_writes_nothing(
    api: ApiWorld, evaluation, field
):
    payload = {"slug": "agent", "name": "Agent", "budget": {"p95": 8000}, "evaluation": evaluation}
    before = db_state()
    response = token_client(api.world.owner).post(LIST, payload, format="json")
    assert response.status_code == 400
    assert field in error_of(response)["fields"], error_of(response)
    assert db_state() == before


@pytest.mark.parametrize(("evaluation", "field"), INVALID_EVALUATION)
def test_patch_rejects_invalid_evaluation_settings_and_writes_nothing(
    api: ApiWorld, evaluation, field
):
    before = db_state()
    response = token_client(api.world.editor).patch(
        DETAIL, {"evaluation": evaluation}, format="json"
    )
    assert response.status_code == 400
    assert field in error_of(response)["fields"], error_of(response)
    assert db_state() == before


@pytest.mark.parametrize("evaluation", [None, "fast", [300], 300])
def test_evaluation_must_be_an_object(api: ApiWorld, evaluation):
    before = db_state()
    response = token_client(api.world.owner).patch(
        DETAIL, {"evaluation": evaluation}, format="json"
    )
    assert response.status_code == 400
    (field,) = error_of(response)["fields"]
    assert field in ("evaluation", "evaluation.non_field_errors")
    assert db_state() == before


def test_an_unknown_evaluation_key_is_named_with_the_allowed_ones(api: ApiWorld):
    response = token_client(api.world.owner).patch(
        DETAIL, {"evaluation": {"window_s": 600, "windw": 600}}, format="json"
    )
    assert error_of(response)["fields"] == {
        "evaluation.windw": ["Unknown setting; use window_s, min_samples, close_after."]
    }
    assert evaluation_in_db(api.pipeline) == (300, 20, 3)


def test_viewer_gets_403_changing_the_evaluation_settings(api: ApiWorld):
    response = token_client(api.world.viewer).patch(
        DETAIL, {"evaluation": {"window_s": 600}}, format="json"
    )
    assert response.status_code == 403
    assert evaluation_in_db(api.pipeline) == (300, 20, 3)


def test_outsider_gets_404_changing_the_evaluation_settings(api: ApiWorld):
    response = token_client(api.world.outsider).patch(
        DETAIL, {"evaluation": {"window_s": 600}}, format="json", HTTP_X_TEAM="acme"
    )
    assert response.status_code == 404
    assert evaluation_in_db(api.pipeline) == (300, 20, 3)
    # The outsider's own pipeline of the same slug is untouched as well.
    assert evaluation_in_db(api.other_pipeline) == (300, 20, 3)


def test_the_schema_documents_evaluation_in_and_out(db):
    schemas = yaml.safe_load(Client().get("/api/schema/").content)["components"]["schemas"]
    assert set(schemas["PipelineEvaluation"]["required"]) == set(DEFAULT_EVALUATION)
    window = schemas["PipelineEvaluationInputRequest"]["properties"]["window_s"]
    assert (window["minimum"], window["maximum"], window["default"]) == (60, 3600, 300)
    assert "evaluation" in schemas["PipelineDetail"]["properties"]
