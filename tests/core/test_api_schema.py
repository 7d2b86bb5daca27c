import re

import yaml
from django.test import Client
from drf_spectacular.validation import validate_schema


def test_the_schema_is_valid_openapi_and_covers_every_endpoint(db):
    response = Client().get("/api/schema/")
    assert response.status_code == 200
    schema = yaml.safe_load(response.content)
    validate_schema(schema)
    paths = schema["paths"]
    assert {
        "/api/v1/me/",
        "/api/v1/teams/",
        "/api/v1/pipelines/",
        "/api/v1/pipelines/{pipeline_slug}/",
        "/api/v1/pipelines/{pipeline_slug}/stages/",
        "/api/v1/pipelines/{pipeline_slug}/stages/reorder/",
        "/api/v1/pipelines/{pipeline_slug}/stages/{stage_slug}/",
        "/api/v1/pipelines/{pipeline_slug}/stages/{stage_slug}/rules/",
        "/api/v1/pipelines/{pipeline_slug}/stages/{stage_slug}/rules/{rule_id}/",
        "/api/v1/pipelines/{pipeline_slug}/no-stage-rules/",
        "/api/v1/pipelines/{pipeline_slug}/no-stage-rules/{rule_id}/",
    } <= set(paths)
    assert set(paths["/api/v1/pipelines/{pipeline_slug}/"]) == {"get", "put", "patch", "delete"}


def test_the_schema_declares_bearer_tokens_and_team_selection(db):
    schema = yaml.safe_load(Client().get("/api/schema/").content)
    assert schema["components"]["securitySchemes"]["bearerAuth"] == {
        "type": "http",
        "scheme": "bearer",
        "description": schema["components"]["securitySchemes"]["bearerAuth"]["description"],
    }
    operation = schema["paths"]["/api/v1/pipelines/"]["get"]
    params = {(p["in"], p["name"]) for p in operation["parameters"]}
    assert {("query", "team"), ("header", "X-Team"), ("query", "search")} <= params
    assert {("query", "page"), ("query", "page_size")} <= params
    assert {"bearerAuth": []} in operation["security"]
    assert "403" in schema["paths"]["/api/v1/pipelines/"]["post"]["responses"]


def test_the_docs_page_renders_from_our_own_host(db):
    response = Client().get("/api/docs/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "swagger-ui" in html
    for cdn in ("cdn.jsdelivr", "unpkg.com", "cdnjs", "//cdn."):
        assert cdn not in html
    # Nothing inline for the Content-Security-Policy to refuse: no style, no script body.
    assert "<style" not in html
    assert " style=" not in html
    assert re.findall(r"<script(?![^>]*\bsrc=)[^>]*>", html) == []
    script = Client().get("/api/docs/", {"script": ""})
    assert script.status_code == 200
    assert script["Content-Type"].startswith("application/javascript")
