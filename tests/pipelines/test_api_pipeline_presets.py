"""Creating a pipeline from a preset through the API, as the creation form does."""

import pytest
import yaml
from django.test import Client

from apps.pipelines.models import Pipeline
from apps.pipelines.presets import PRESETS, preset_plan
from tests.builders.api import ApiWorld, db_state, error_of, token_client

LIST = "/api/v1/pipelines/"


def payload(**changes: object) -> dict[str, object]:
    return {"slug": "ask", "name": "Ask", "budget": {"p95": 2000}, "preset": "rag-chat", **changes}


@pytest.mark.parametrize("role", ["owner", "editor"])
def test_writers_create_a_pipeline_with_the_presets_stages_and_rules(
    api: ApiWorld, role: str
) -> None:
    response = token_client(getattr(api.world, role)).post(LIST, payload(), format="json")
    assert response.status_code == 201
    stages = response.json()["stages"]
    assert [(s["slug"], s["budget"]) for s in stages] == [
        ("embedding", {"p95": 100}), ("retrieval", {"p95": 200}), ("rerank", {"p95": 100}),
        ("ttft", {"p95": 400}), ("generation", {"p95": 900}),
    ]  # fmt: skip
    plan = preset_plan(key="rag-chat", budget={"p95": 2000})
    assert [len(s["rules"]) for s in stages] == [len(p.rules) for p in plan.stages]
    assert {"span_name": "", "attributes": {"db.system": "Qdrant"}}.items() <= next(
        rule for rule in stages[1]["rules"] if rule["attributes"] == {"db.system": "Qdrant"}
    ).items()


def test_without_a_preset_the_pipeline_has_no_stages(api: ApiWorld) -> None:
    body = token_client(api.world.owner).post(
        LIST, {k: v for k, v in payload().items() if k != "preset"}, format="json"
    )
    assert body.status_code == 201
    assert body.json()["stages"] == []


@pytest.mark.parametrize("preset", ["nonsense", "", None, 3, ["rag-chat"], "x" * 100_000])
def test_an_unknown_preset_is_refused_and_nothing_is_written(api: ApiWorld, preset: object) -> None:
    before = db_state()
    response = token_client(api.world.owner).post(LIST, payload(preset=preset), format="json")
    assert response.status_code == 400
    assert "preset" in error_of(response)["fields"]
    assert db_state() == before


def test_a_preset_under_a_taken_slug_writes_nothing(api: ApiWorld) -> None:
    before = db_state()
    response = token_client(api.world.owner).post(LIST, payload(slug="rag-chat"), format="json")
    assert response.status_code == 400
    assert "slug" in error_of(response)["fields"]
    assert db_state() == before


def test_a_viewer_is_refused_and_an_outsider_sees_no_team(api: ApiWorld) -> None:
    before = db_state()
    viewer = token_client(api.world.viewer).post(LIST, payload(), format="json")
    assert viewer.status_code == 403
    outsider = token_client(api.world.outsider).post(
        LIST, payload(), format="json", HTTP_X_TEAM="acme"
    )
    assert outsider.status_code == 404
    assert db_state() == before
    assert not Pipeline.objects.filter(slug="ask").exists()


def test_updates_take_no_preset(api: ApiWorld) -> None:
    response = token_client(api.world.owner).patch(
        LIST + "rag-chat/", {"preset": "rag-chat", "name": "Renamed"}, format="json"
    )
    assert response.status_code == 200
    assert [s["slug"] for s in response.json()["stages"]] == ["retrieval", "generation"]


def test_the_schema_lists_the_presets(db: None) -> None:
    schemas = yaml.safe_load(Client().get("/api/schema/").content)["components"]["schemas"]
    preset = schemas["PipelineCreateInputRequest"]["properties"]["preset"]
    assert preset["default"] == "blank"
    assert "preset" not in schemas["PipelineInputRequest"]["properties"]
    enum = preset.get("enum") or schemas[preset["allOf"][0]["$ref"].rsplit("/", 1)[1]]["enum"]
    assert set(enum) == set(PRESETS)
