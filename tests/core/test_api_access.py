"""Every endpoint against every kind of caller: owner, editor, viewer, outsider, anonymous."""

from dataclasses import dataclass
from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.builders.api import ApiWorld, db_state, error_of, session_client, token_client

P = "/api/v1/pipelines/rag-chat/"
S = P + "stages/retrieval/"


@dataclass(frozen=True)
class Endpoint:
    name: str
    method: str
    path: str
    body: dict[str, Any] | None = None
    ok: int = 200

    @property
    def write(self) -> bool:
        return self.method != "get"

    def url(self, api: ApiWorld) -> str:
        return self.path.format(rule=api.rule.pk, no_stage=api.no_stage_rule.pk)

    def call(self, client: APIClient, api: ApiWorld, **extra: Any) -> Any:
        return getattr(client, self.method)(self.url(api), self.body, format="json", **extra)


ENDPOINTS = [
    Endpoint("pipeline list", "get", "/api/v1/pipelines/"),
    Endpoint(
        "pipeline create",
        "post",
        "/api/v1/pipelines/",
        {"slug": "agent", "name": "Agent", "budget": {"p95": 8000}},
        201,
    ),
    Endpoint("pipeline detail", "get", P),
    Endpoint(
        "pipeline replace", "put", P, {"slug": "rag-chat", "name": "RAG", "budget": {"p50": 900}}
    ),
    Endpoint("pipeline change", "patch", P, {"description": "Chat answers"}),
    Endpoint("pipeline delete", "delete", P, ok=204),
    Endpoint("stage list", "get", P + "stages/"),
    Endpoint("stage create", "post", P + "stages/", {"slug": "rerank", "name": "Rerank"}, 201),
    Endpoint(
        "stage reorder", "post", P + "stages/reorder/", {"order": ["generation", "retrieval"]}
    ),
    Endpoint("stage detail", "get", S),
    Endpoint("stage change", "patch", S, {"budget": {"p90": 250}}),
    Endpoint("stage delete", "delete", S, ok=204),
    Endpoint("rule list", "get", S + "rules/"),
    Endpoint("rule create", "post", S + "rules/", {"span_name": "vector.*"}, 201),
    Endpoint("rule detail", "get", S + "rules/{rule}/"),
    Endpoint("rule change", "patch", S + "rules/{rule}/", {"service": "search-api"}),
    Endpoint("rule delete", "delete", S + "rules/{rule}/", ok=204),
    Endpoint("no-stage rule list", "get", P + "no-stage-rules/"),
    Endpoint("no-stage rule create", "post", P + "no-stage-rules/", {"service": "cron"}, 201),
    Endpoint("no-stage rule detail", "get", P + "no-stage-rules/{no_stage}/"),
    Endpoint("no-stage rule change", "patch", P + "no-stage-rules/{no_stage}/", {"service": "x"}),
    Endpoint("no-stage rule delete", "delete", P + "no-stage-rules/{no_stage}/", ok=204),
]
WRITES = [e for e in ENDPOINTS if e.write]
IDS = [e.name for e in ENDPOINTS]


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=IDS)
@pytest.mark.parametrize("role", ["owner", "editor"])
def test_owner_and_editor_may_use_every_endpoint(api: ApiWorld, role: str, endpoint: Endpoint):
    before = db_state()
    response = endpoint.call(token_client(getattr(api.world, role)), api)
    assert response.status_code == endpoint.ok, response.content
    assert (db_state() != before) == endpoint.write


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=IDS)
def test_viewer_reads_but_gets_403_on_write(api: ApiWorld, endpoint: Endpoint):
    before = db_state()
    response = endpoint.call(token_client(api.world.viewer), api)
    if endpoint.write:
        assert response.status_code == 403
        assert error_of(response)["code"] == "permission_denied"
    else:
        assert response.status_code == 200
    assert db_state() == before


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=IDS)
def test_outsider_naming_the_team_gets_404(api: ApiWorld, endpoint: Endpoint):
    before = db_state()
    client = token_client(api.world.outsider)
    response = endpoint.call(client, api, HTTP_X_TEAM="acme")
    assert response.status_code == 404
    assert error_of(response)["code"] == "not_found"
    assert db_state() == before


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=IDS)
def test_anonymous_gets_401_with_a_bearer_challenge(api: ApiWorld, endpoint: Endpoint):
    before = db_state()
    response = endpoint.call(APIClient(), api)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Bearer"
    assert error_of(response)["code"] == "not_authenticated"
    assert db_state() == before


@pytest.mark.parametrize("endpoint", WRITES, ids=[e.name for e in WRITES])
def test_session_login_works_like_a_token(api: ApiWorld, endpoint: Endpoint):
    before = db_state()
    response = endpoint.call(session_client(api.world.editor), api)
    assert response.status_code == endpoint.ok
    assert db_state() != before


def test_session_writes_need_the_csrf_token(api: ApiWorld):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(api.world.owner)
    response = client.patch(P, {"name": "No CSRF"}, format="json")
    assert response.status_code == 403
    api.pipeline.refresh_from_db()
    assert api.pipeline.name == "RAG chat answer"


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/pipelines/nope/",
        "/api/v1/pipelines/rag-chat/stages/nope/",
        "/api/v1/pipelines/rag-chat/stages/nope/rules/",
        "/api/v1/pipelines/rag-chat/stages/retrieval/rules/999999/",
        "/api/v1/pipelines/nope/no-stage-rules/",
        "/api/v1/pipelines/rag-chat/no-stage-rules/999999/",
    ],
)
def test_unknown_objects_get_404(api: ApiWorld, path: str):
    response = token_client(api.world.owner).get(path)
    assert response.status_code == 404
    assert error_of(response) == {"code": "not_found", "message": "Not found."}
