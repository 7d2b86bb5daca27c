import pytest

from apps.pipelines.models import Stage
from tests.builders.api import ApiWorld, db_state, error_of, token_client
from tests.builders.configuration import make_stage

STAGES = "/api/v1/pipelines/rag-chat/stages/"
RETRIEVAL = STAGES + "retrieval/"
REORDER = STAGES + "reorder/"


def order(api: ApiWorld) -> list[str]:
    return list(api.pipeline.stages.order_by("position").values_list("slug", flat=True))


def test_the_list_is_in_stage_order_with_rules(api: ApiWorld):
    body = token_client(api.world.viewer).get(STAGES).json()
    assert body["count"] == 2
    assert [(s["slug"], s["position"]) for s in body["results"]] == [
        ("retrieval", 0),
        ("generation", 1),
    ]
    assert len(body["results"][0]["rules"]) == 1


def test_the_list_filters_by_search_and_pages(api: ApiWorld):
    make_stage(api.pipeline, "rerank", name="Re-rank")
    client = token_client(api.world.viewer)
    assert [s["slug"] for s in client.get(STAGES, {"search": "rank"}).json()["results"]] == [
        "rerank"
    ]
    page = client.get(STAGES, {"page_size": 2, "page": 2}).json()
    assert [s["slug"] for s in page["results"]] == ["rerank"]


def test_create_appends_the_stage_with_its_budget(api: ApiWorld):
    response = token_client(api.world.editor).post(
        STAGES, {"slug": "rerank", "name": "Rerank", "budget": {"p90": 120}}, format="json"
    )
    assert response.status_code == 201
    assert response.json()["position"] == 2
    stage = Stage.objects.get(pipeline=api.pipeline, slug="rerank")
    assert (stage.budget_percentile, stage.budget_ms, stage.position) == ("p90", 120, 2)


def test_a_stage_may_have_no_budget(api: ApiWorld):
    response = token_client(api.world.editor).post(
        STAGES, {"slug": "queue", "name": "Queue", "budget": None}, format="json"
    )
    assert response.json()["budget"] is None
    assert Stage.objects.get(pipeline=api.pipeline, slug="queue").budget_ms is None


INVALID = [
    ({"budget": {"p95": 0}}, "budget"),
    ({"budget": {"p95": -1}}, "budget"),
    ({"budget": {"p42": 10}}, "budget"),
    ({"budget": {"p50": 10, "p95": 20}}, "budget"),
    ({"slug": "retrieval"}, "slug"),
    ({"slug": "-bad-"}, "slug"),
    ({"name": "x" * 101}, "name"),
]


@pytest.mark.parametrize(("change", "field"), INVALID)
def test_create_rejects_invalid_input_and_writes_nothing(api: ApiWorld, change, field):
    before = db_state()
    payload = {"slug": "rerank", "name": "Rerank", **change}
    response = token_client(api.world.owner).post(STAGES, payload, format="json")
    assert response.status_code == 400
    assert field in error_of(response)["fields"]
    assert db_state() == before


def test_the_same_stage_slug_may_exist_in_another_pipeline(api: ApiWorld):
    # acme's rag-chat has a "generation" stage; globex's rag-chat may have one too.
    response = token_client(api.world.outsider).post(
        STAGES, {"slug": "generation", "name": "Generation"}, format="json"
    )
    assert response.status_code == 201
    assert api.other_pipeline.stages.filter(slug="generation").exists()


def test_patch_changes_the_budget_and_keeps_the_rest(api: ApiWorld):
    response = token_client(api.world.editor).patch(
        RETRIEVAL, {"budget": {"p99": 600}}, format="json"
    )
    assert response.status_code == 200
    api.retrieval.refresh_from_db()
    assert (api.retrieval.budget_percentile, api.retrieval.budget_ms) == ("p99", 600)
    assert api.retrieval.name == "Retrieval"


def test_patch_clears_the_budget_with_null(api: ApiWorld):
    token_client(api.world.editor).patch(RETRIEVAL, {"budget": None}, format="json")
    api.retrieval.refresh_from_db()
    assert api.retrieval.budget_ms is None


def test_patch_to_a_slug_in_use_is_refused(api: ApiWorld):
    before = db_state()
    response = token_client(api.world.editor).patch(
        RETRIEVAL, {"slug": "generation"}, format="json"
    )
    assert response.status_code == 400
    assert "slug" in error_of(response)["fields"]
    assert db_state() == before


def test_position_is_read_only(api: ApiWorld):
    token_client(api.world.editor).patch(RETRIEVAL, {"position": 7}, format="json")
    api.retrieval.refresh_from_db()
    assert api.retrieval.position == 0


def test_delete_renumbers_the_stages_left(api: ApiWorld):
    response = token_client(api.world.owner).delete(RETRIEVAL)
    assert response.status_code == 204
    assert list(api.pipeline.stages.values_list("slug", "position")) == [("generation", 0)]


def test_reorder_applies_the_new_order(api: ApiWorld):
    make_stage(api.pipeline, "rerank")
    response = token_client(api.world.editor).post(
        REORDER, {"order": ["rerank", "generation", "retrieval"]}, format="json"
    )
    assert response.status_code == 200
    assert [s["slug"] for s in response.json()] == ["rerank", "generation", "retrieval"]
    assert order(api) == ["rerank", "generation", "retrieval"]


@pytest.mark.parametrize(
    "new_order",
    [
        ["retrieval"],
        ["retrieval", "generation", "retrieval"],
        ["retrieval", "generation", "rerank"],
        ["generation", "nope"],
        [],
    ],
)
def test_reorder_must_name_every_stage_once(api: ApiWorld, new_order):
    before = db_state()
    response = token_client(api.world.editor).post(REORDER, {"order": new_order}, format="json")
    assert response.status_code == 400
    assert "order" in error_of(response)["fields"]
    assert db_state() == before


def test_reorder_cannot_name_another_pipelines_stage(api: ApiWorld):
    api.other_stage.slug = "globex-only"
    api.other_stage.save()
    before = db_state()
    response = token_client(api.world.owner).post(
        REORDER, {"order": ["generation", "retrieval", "globex-only"]}, format="json"
    )
    assert response.status_code == 400
    assert db_state() == before


def test_reorder_needs_a_list(api: ApiWorld):
    response = token_client(api.world.owner).post(REORDER, {"order": "a,b"}, format="json")
    assert response.status_code == 400
    assert "order" in error_of(response)["fields"]
