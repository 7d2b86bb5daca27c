"""The no-stage rules API: a pipeline's spans that belong to no stage on purpose, with the
same conditions and checks as span rules, and the pipeline's rule cap."""

import pytest
import yaml
from django.test import Client

from apps.pipelines.models import NoStageRule
from tests.builders.api import ApiWorld, db_state, error_of, token_client
from tests.builders.configuration import make_no_stage_rule

RULES = "/api/v1/pipelines/rag-chat/no-stage-rules/"


def test_the_list_shows_the_pipeline_s_rules_in_order(api: ApiWorld):
    make_no_stage_rule(api.pipeline, span_name="warm *", service="cache", position=5)
    body = token_client(api.world.viewer).get(RULES).json()
    assert body["count"] == 2
    first, second = body["results"]
    assert first == {
        "id": api.no_stage_rule.pk,
        "position": 0,
        "span_name": "cache flush",
        "name_match": "glob",
        "attributes": {},
        "span_kind": "",
        "service": "",
    }
    assert (second["span_name"], second["service"], second["position"]) == ("warm *", "cache", 5)


def test_the_list_filters_and_never_shows_another_team_s(api: ApiWorld):
    make_no_stage_rule(api.pipeline, span_name="^pg", name_match="regex", span_kind="client")
    client = token_client(api.world.viewer)

    def names(**params):
        return [r["span_name"] for r in client.get(RULES, params).json()["results"]]

    assert names(name_match="regex") == ["^pg"]
    assert names(span_kind="client") == ["^pg"]
    assert names(search="FLUSH") == ["cache flush"]  # not globex's "secret flush"


def test_the_pipeline_detail_carries_its_no_stage_rules(api: ApiWorld):
    body = token_client(api.world.viewer).get("/api/v1/pipelines/rag-chat/").json()
    assert [rule["span_name"] for rule in body["no_stage_rules"]] == ["cache flush"]
    assert "portion" not in body["no_stage_rules"][0]


def test_create_stores_the_rule_after_the_last(api: ApiWorld):
    payload = {
        "span_name": r"^cache\.",
        "name_match": "regex",
        "span_kind": "internal",
        "service": "worker",
        "attributes": {"background": True},
    }
    response = token_client(api.world.editor).post(RULES, payload, format="json")
    assert response.status_code == 201
    rule = NoStageRule.objects.get(pk=response.json()["id"])
    assert rule.pipeline == api.pipeline
    assert rule.position == 1
    assert (rule.span_name, rule.name_match, rule.attributes) == (
        r"^cache\.",
        "regex",
        {"background": True},
    )


INVALID = [
    ({"span_name": "(unclosed", "name_match": "regex"}, "span_name"),
    ({"span_name": "(?=x)", "name_match": "regex"}, "span_name"),
    ({}, "span_name"),
    ({"attributes": {}}, "span_name"),
    ({"span_name": "x", "name_match": "fuzzy"}, "name_match"),
    ({"span_name": "x", "span_kind": "weird"}, "span_kind"),
    ({"attributes": {"": "x"}}, "attributes"),
    ({"attributes": {"k": {"nested": 1}}}, "attributes"),
    ({"attributes": {"k": None}}, "attributes"),
    ({"attributes": ["k", "v"]}, "attributes"),
    ({"attributes": {"k": "a\x00b"}}, "attributes"),
    ({"span_name": "x" * 501}, "span_name"),
    ({"service": "s" * 201}, "service"),
    ({"span_name": "x", "position": -1}, "position"),
    ({"span_name": ["x"]}, "span_name"),
]


@pytest.mark.parametrize(("payload", "field"), INVALID)
def test_create_rejects_invalid_rules_and_writes_nothing(api: ApiWorld, payload, field):
    before = db_state()
    response = token_client(api.world.owner).post(RULES, payload, format="json")
    assert response.status_code == 400
    assert field in error_of(response)["fields"], error_of(response)
    assert db_state() == before


def test_the_same_regex_gets_the_same_message_as_a_span_rule(api: ApiWorld):
    body = {"span_name": r"(a)\1", "name_match": "regex"}
    client = token_client(api.world.owner)
    no_stage = client.post(RULES, body, format="json")
    span_rule = client.post(
        "/api/v1/pipelines/rag-chat/stages/retrieval/rules/", body, format="json"
    )
    assert error_of(no_stage)["fields"]["span_name"] == [
        r"Invalid regular expression “(a)\1”: backreferences are not supported (RE2 syntax)."
    ]
    assert error_of(no_stage)["fields"] == error_of(span_rule)["fields"]


def test_a_body_that_is_not_json_is_a_400(api: ApiWorld):
    before = db_state()
    response = token_client(api.world.owner).post(
        RULES, "{not json", content_type="application/json"
    )
    assert response.status_code == 400
    assert db_state() == before


def test_portion_is_not_part_of_a_no_stage_rule(api: ApiWorld):
    response = token_client(api.world.owner).post(
        RULES, {"span_name": "x", "portion": "after_first_token"}, format="json"
    )
    assert response.status_code == 201
    assert "portion" not in response.json()


def test_patch_changes_only_the_fields_sent(api: ApiWorld):
    url = f"{RULES}{api.no_stage_rule.pk}/"
    response = token_client(api.world.editor).patch(url, {"service": "worker"}, format="json")
    assert response.status_code == 200
    api.no_stage_rule.refresh_from_db()
    assert (api.no_stage_rule.span_name, api.no_stage_rule.service) == ("cache flush", "worker")


def test_patch_that_would_leave_no_condition_is_refused(api: ApiWorld):
    before = db_state()
    response = token_client(api.world.editor).patch(
        f"{RULES}{api.no_stage_rule.pk}/", {"span_name": ""}, format="json"
    )
    assert response.status_code == 400
    assert "at least one condition" in str(error_of(response)["fields"]["span_name"])
    assert db_state() == before


def test_delete_removes_only_that_rule(api: ApiWorld):
    response = token_client(api.world.owner).delete(f"{RULES}{api.no_stage_rule.pk}/")
    assert response.status_code == 204
    assert not NoStageRule.objects.filter(pk=api.no_stage_rule.pk).exists()
    assert NoStageRule.objects.filter(pk=api.other_no_stage_rule.pk).exists()


def test_another_team_s_rule_id_is_a_404_under_one_s_own_pipeline(api: ApiWorld):
    before = db_state()
    client = token_client(api.world.owner)
    url = f"{RULES}{api.other_no_stage_rule.pk}/"
    assert client.get(url).status_code == 404
    assert client.patch(url, {"service": "x"}, format="json").status_code == 404
    assert client.delete(url).status_code == 404
    assert db_state() == before


def test_the_schema_documents_the_no_stage_rules(db):
    schema = yaml.safe_load(Client().get("/api/schema/").content)
    operations = schema["paths"]["/api/v1/pipelines/{pipeline_slug}/no-stage-rules/"]
    assert set(operations) == {"get", "post"}
    assert "untracked" in operations["post"]["description"]
    item = schema["components"]["schemas"]["NoStageRule"]
    assert set(item["properties"]) == {
        "id",
        "position",
        "span_name",
        "name_match",
        "attributes",
        "span_kind",
        "service",
    }
    detail = schema["components"]["schemas"]["PipelineDetail"]["properties"]
    assert detail["no_stage_rules"]["items"] == {"$ref": "#/components/schemas/NoStageRule"}
