import pytest

from apps.pipelines.models import SpanRule
from tests.builders.api import ApiWorld, db_state, error_of, token_client
from tests.builders.configuration import make_rule

RULES = "/api/v1/pipelines/rag-chat/stages/retrieval/rules/"


def test_the_list_shows_the_stages_rules_in_order(api: ApiWorld):
    make_rule(api.retrieval, span_name="vector.search", position=5)
    body = token_client(api.world.viewer).get(RULES).json()
    assert body["count"] == 2
    first, second = body["results"]
    assert first == {
        "id": api.rule.pk,
        "position": 0,
        "span_name": "",
        "name_match": "glob",
        "attributes": {"openinference.span.kind": "RETRIEVER"},
        "span_kind": "",
        "service": "",
        "portion": "whole",
        "first_token_event": "first_token",
    }
    assert second["span_name"] == "vector.search"


def test_the_list_filters(api: ApiWorld):
    make_rule(api.retrieval, span_name="pg.*", name_match="regex", service="db", span_kind="client")
    client = token_client(api.world.viewer)

    def spans(**params):
        return [r["span_name"] for r in client.get(RULES, params).json()["results"]]

    assert spans(name_match="regex") == ["pg.*"]
    assert spans(span_kind="client") == ["pg.*"]
    assert spans(service="db") == ["pg.*"]
    assert spans(search="PG") == ["pg.*"]
    assert spans(portion="after_first_token") == []


def test_an_unknown_filter_choice_is_a_400_naming_it(api: ApiWorld):
    response = token_client(api.world.viewer).get(RULES, {"portion": "most"})
    assert response.status_code == 400
    assert "portion" in error_of(response)["fields"]


def test_create_stores_the_rule_after_the_last(api: ApiWorld):
    payload = {
        "span_name": r"^chat\s",
        "name_match": "regex",
        "span_kind": "client",
        "service": "llm-gw",
        "portion": "until_first_token",
        "first_token_event": "gen_ai.first_chunk",
        "attributes": {"gen_ai.operation.name": "chat"},
    }
    response = token_client(api.world.editor).post(RULES, payload, format="json")
    assert response.status_code == 201
    rule = SpanRule.objects.get(pk=response.json()["id"])
    assert rule.stage == api.retrieval
    assert rule.position == 1
    assert (rule.portion, rule.first_token_event) == ("until_first_token", "gen_ai.first_chunk")
    assert rule.attributes == {"gen_ai.operation.name": "chat"}


INVALID = [
    ({"span_name": "(unclosed", "name_match": "regex"}, "span_name"),
    ({}, "span_name"),
    ({"span_name": "x", "name_match": "fuzzy"}, "name_match"),
    ({"span_name": "x", "span_kind": "weird"}, "span_kind"),
    ({"span_name": "x", "portion": "half"}, "portion"),
    ({"attributes": {"": "x"}}, "attributes"),
    ({"attributes": {"k": {"nested": 1}}}, "attributes"),
    (
        {"span_name": "x", "portion": "after_first_token", "first_token_event": " "},
        "first_token_event",
    ),
    ({"span_name": "x", "position": -1}, "position"),
]


@pytest.mark.parametrize(("payload", "field"), INVALID)
def test_create_rejects_invalid_rules_and_writes_nothing(api: ApiWorld, payload, field):
    before = db_state()
    response = token_client(api.world.owner).post(RULES, payload, format="json")
    assert response.status_code == 400
    assert field in error_of(response)["fields"], error_of(response)
    assert db_state() == before


@pytest.mark.parametrize(
    ("span_name", "phrase"),
    [
        (r"(a)\1", "backreferences are not supported (RE2 syntax)"),
        ("(?=x)", "lookahead assertions are not supported (RE2 syntax)"),
    ],
)
def test_create_refuses_a_regex_re2_cannot_run_naming_the_construct(
    api: ApiWorld, span_name, phrase
):
    before = db_state()
    response = token_client(api.world.editor).post(
        RULES, {"span_name": span_name, "name_match": "regex"}, format="json"
    )
    assert response.status_code == 400
    assert error_of(response)["fields"]["span_name"] == [
        f"Invalid regular expression “{span_name}”: {phrase}."
    ]
    assert db_state() == before


def test_patch_changes_only_the_fields_sent(api: ApiWorld):
    url = f"{RULES}{api.rule.pk}/"
    response = token_client(api.world.editor).patch(url, {"service": "vectors"}, format="json")
    assert response.status_code == 200
    api.rule.refresh_from_db()
    assert api.rule.service == "vectors"
    assert api.rule.attributes == {"openinference.span.kind": "RETRIEVER"}


def test_patch_to_an_invalid_regex_is_refused(api: ApiWorld):
    before = db_state()
    response = token_client(api.world.editor).patch(
        f"{RULES}{api.rule.pk}/", {"span_name": "a[", "name_match": "regex"}, format="json"
    )
    assert response.status_code == 400
    assert "span_name" in error_of(response)["fields"]
    assert db_state() == before


def test_delete_removes_only_that_rule(api: ApiWorld):
    response = token_client(api.world.owner).delete(f"{RULES}{api.rule.pk}/")
    assert response.status_code == 204
    assert not SpanRule.objects.filter(pk=api.rule.pk).exists()
    assert SpanRule.objects.filter(pk=api.other_rule.pk).exists()
