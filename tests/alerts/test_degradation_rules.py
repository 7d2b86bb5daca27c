"""A degradation condition, configured through every door: ``alert_rule_clean`` checks
its percentage once, and the form, the API and the configuration file map their shapes
onto it; owners and editors write, viewers read, outsiders see nothing of the team."""

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ValidationError

from apps.alerts.models import AlertRule, ConditionKind, RuleScope
from apps.alerts.rule_clean import (
    DEGRADATION_ONLY,
    DEGRADATION_REQUIRED,
    VIOLATION_ONLY,
    alert_rule_clean,
)
from apps.pipelines.models import Stage
from tests.alerts.degradations import degradation_rule
from tests.alerts.test_api import RULES, call, client, rule_url, snapshot
from tests.alerts.test_config_as_code import alert_file, budgets, errors, write
from tests.alerts.test_pages import Alerting, build_alerting, html_of, rule_data, url
from tests.builders.api import error_of
from tests.builders.configuration import make_stage
from tests.conftest import TeamWorld, client_for

WRITERS = ["owner", "editor"]
CONDITION = {"degradation": {"over_percent": 20, "for_minutes": 5}}


@pytest.fixture
def alerting(world: TeamWorld) -> Alerting:
    return build_alerting(world)


@pytest.fixture
def rerank(alerting: Alerting) -> Stage:
    return make_stage(alerting.pipeline, "rerank", name="Rerank", budget_ms=150)


def created() -> AlertRule | None:
    return AlertRule.objects.filter(slug="rerank-degraded").first()


# --- the one validator -------------------------------------------------------------------


def refused(values: dict[str, Any]) -> dict[str, list[str]]:
    with pytest.raises(ValidationError) as caught:
        alert_rule_clean(values)
    return caught.value.message_dict


def test_the_percentage_holds_at_its_edges() -> None:
    for good in (None, "", 0.1, "0.1", 20, "12.5", Decimal("99.9"), 100):
        alert_rule_clean({"degradation_percent": good})
    for bad in (0, -5, 0.05, 100.1, "12.34", "lots", True, [20]):
        assert list(refused({"degradation_percent": bad})) == ["degradation_percent"], bad
    assert alert_rule_clean({"degradation_percent": "12.5"}) == {
        "degradation_percent": Decimal("12.5")
    }


def test_a_degradation_condition_needs_its_percentage_and_nothing_of_a_violation() -> None:
    condition = {"condition": ConditionKind.DEGRADATION}
    assert refused({**condition, "degradation_percent": None}) == {
        "degradation_percent": [DEGRADATION_REQUIRED]
    }
    violation = {"violation_factor": 2, "violation_percentile": "p95"}
    assert refused({**condition, "degradation_percent": 20, **violation}) == {
        "violation_factor": [VIOLATION_ONLY],
        "violation_percentile": [VIOLATION_ONLY],
    }
    # A door that passes the condition alone (the file's scope check) asks for nothing more.
    assert alert_rule_clean({**condition, "scope": RuleScope.ANY_STAGE})


@pytest.mark.parametrize("kind", [ConditionKind.VIOLATION, ConditionKind.BURN_RATE])
def test_the_percentage_belongs_to_a_degradation_condition(kind: ConditionKind) -> None:
    assert refused({"condition": kind, "degradation_percent": 20}) == {
        "degradation_percent": [DEGRADATION_ONLY[kind]]
    }


# --- the form ----------------------------------------------------------------------------


def form_data(a: Alerting, rerank: Stage, **overrides: Any) -> dict[str, Any]:
    fields = {
        "slug": "rerank-degraded",
        "stage": str(rerank.pk),
        "condition": "degradation",
        "degradation_percent": "20",
        **overrides,
    }
    return rule_data(a, **fields)


@pytest.mark.parametrize("role", WRITERS)
def test_writers_create_a_degradation_rule_for_one_stage(
    alerting: Alerting, rerank: Stage, role: str
) -> None:
    client = client_for(getattr(alerting.world, role))
    response = client.post(url("rule_create"), form_data(alerting, rerank))

    assert response.status_code == 302
    rule = created()
    assert rule is not None
    assert (rule.condition, rule.stage, rule.scope) == ("degradation", rerank, "stage")
    assert (rule.degradation_percent, rule.violation_for_minutes) == (Decimal("20.0"), 5)
    assert 'value="20.0"' in html_of(client.get(url("rule_edit", rule_slug=rule.slug)))


def test_a_viewer_gets_403_and_an_outsider_404_and_nothing_is_made(
    alerting: Alerting, rerank: Stage
) -> None:
    data = form_data(alerting, rerank)
    assert client_for(alerting.world.viewer).post(url("rule_create"), data).status_code == 403
    assert client_for(alerting.world.outsider).post(url("rule_create"), data).status_code == 404
    assert created() is None


def test_an_outsider_can_neither_see_nor_name_another_teams_stage(
    alerting: Alerting, rerank: Stage
) -> None:
    outsider = client_for(alerting.world.outsider)
    form = html_of(outsider.get(url("rule_create", team="globex")))
    assert "Rerank" not in form
    assert "RAG chat" not in form
    data = form_data(alerting, rerank, pipeline="billing", channels=[])

    response = outsider.post(url("rule_create", team="globex"), data)

    assert response.status_code == 422
    assert "Select a valid choice" in html_of(response)
    assert created() is None


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"degradation_percent": "0"}, "Must be between 0.1 and 100 % of requests, not 0."),
        ({"degradation_percent": "-3"}, "Must be between 0.1 and 100 % of requests, not -3."),
        ({"degradation_percent": "100.5"}, "Must be between 0.1 and 100 % of requests, not 100.5."),
        ({"degradation_percent": "12.34"}, "Has at most 1 decimal."),
        ({"degradation_percent": "lots"}, "Enter a number."),
        ({"degradation_percent": ""}, "Must be given for a degradation condition"),
        ({"violation_factor": "1.5"}, "Belongs to a violation condition"),
        (
            {"condition": "burn_rate", "scope": "e2e", "stage": ""},
            "Belongs to a degradation condition: a burn rate watches the objective.",
        ),
    ],
)
def test_bad_degradation_input_is_shown_on_the_form_and_saves_nothing(
    alerting: Alerting, rerank: Stage, overrides: dict[str, Any], message: str
) -> None:
    response = client_for(alerting.world.owner).post(
        url("rule_create"), form_data(alerting, rerank, **overrides)
    )

    assert response.status_code == 422
    assert message in html_of(response)
    assert created() is None


def test_the_rules_page_says_the_condition_in_words(alerting: Alerting, rerank: Stage) -> None:
    degradation_rule(alerting.pipeline, [], stage=rerank, percent="20", minutes=5)
    degradation_rule(
        alerting.pipeline,
        [],
        slug="each-stage",
        scope=RuleScope.ANY_STAGE,
        percent="12.5",
        minutes=0,
    )

    html = html_of(client_for(alerting.world.viewer).get(url("rules")))

    one = html.split('data-rule="rerank-degraded"')[1].split("</tr>")[0]
    assert "stage Rerank" in one
    assert "degradation rate at least 20 % for 5 min" in one
    each = html.split('data-rule="each-stage"')[1].split("</tr>")[0]
    assert "a stage&#x27;s degradation rate at least 12.5 %, at once" in each


# --- the API -----------------------------------------------------------------------------


@pytest.mark.parametrize("role", WRITERS)
def test_writers_create_a_degradation_rule_through_the_api(
    alerting: Alerting, rerank: Stage, role: str
) -> None:
    body = {"slug": "rerank-degraded", "pipeline": "rag-chat", "scope": "stage:rerank"}

    response = call(client(alerting, role), "post", RULES, {**body, "condition": CONDITION})

    assert response.status_code == 201, response.json()
    assert response.json()["condition"] == CONDITION
    assert response.json()["scope"] == "stage:rerank"
    rule = created()
    assert rule is not None
    assert (rule.degradation_percent, rule.violation_for_minutes, rule.stage) == (
        Decimal("20"),
        5,
        rerank,
    )
    read = client(alerting, "viewer").get(rule_url("rerank-degraded")).json()
    assert read["condition"] == CONDITION


def test_viewer_403_outsider_404_through_the_api(alerting: Alerting, rerank: Stage) -> None:
    body = {"slug": "rerank-degraded", "pipeline": "rag-chat", "condition": CONDITION}
    before = snapshot()
    assert call(client(alerting, "viewer"), "post", RULES, body).status_code == 403
    outsider = client(alerting, "outsider")
    assert call(outsider, "post", f"{RULES}?team=acme", body).status_code == 404
    # From its own team, acme's stage is one its pipeline does not have.
    theirs = {**body, "pipeline": "billing", "scope": "stage:rerank"}
    response = call(outsider, "post", RULES, theirs)
    assert response.status_code == 400
    assert error_of(response)["fields"]["scope"] == ["Pipeline “billing” has no stage “rerank”."]
    assert snapshot() == before


@pytest.mark.parametrize(
    ("condition", "said"),
    [
        ({"degradation": {"over_percent": 0}}, "over_percent must be between 0.1 and 100 %"),
        ({"degradation": {"over_percent": -1}}, "over_percent must be between 0.1 and 100 %"),
        ({"degradation": {"over_percent": 100.5}}, "of requests, not 100.5."),
        ({"degradation": {"over_percent": 12.34}}, "over_percent has at most 1 decimal."),
        ({"degradation": {"over_percent": "lots"}}, "over_percent must be a percentage"),
        ({"degradation": {"over_percent": True}}, "over_percent must be a percentage"),
        ({"degradation": {}}, "over_percent must be given for a degradation condition"),
        ({"degradation": {"for_minutes": 5}}, "over_percent must be given"),
        ({"degradation": {"over_percent": None}}, "over_percent must be given"),
        ({"degradation": 20}, "degradation is an object"),
        ({"degradation": {"over_percent": 20, "factor": 2}}, "Unknown key factor in degradation."),
        (
            {"degradation": {"over_percent": 20, "for_minutes": 1441}},
            "for_minutes must be a whole number of minutes between 0 and 1440.",
        ),
        (
            {"burn_rate": "default", "degradation": {"over_percent": 20}},
            "not both burn_rate and degradation",
        ),
        (
            {"violation_for_minutes": 2, "degradation": {"over_percent": 20}},
            "not both degradation and violation_for_minutes",
        ),
    ],
)
def test_bad_degradation_input_is_a_400_on_the_condition(
    alerting: Alerting, condition: Any, said: str
) -> None:
    before = snapshot()
    body = {"slug": "rerank-degraded", "pipeline": "rag-chat", "condition": condition}

    response = call(client(alerting, "owner"), "post", RULES, body)

    assert response.status_code == 400, response.json()
    messages = error_of(response)["fields"]["condition"]
    assert any(said in message for message in messages), messages
    assert snapshot() == before


def test_a_condition_sent_switches_a_rule_to_degradation_and_back(alerting: Alerting) -> None:
    api = client(alerting, "editor")
    path = rule_url(alerting.rule.slug)

    to_degradation = call(api, "patch", path, {"condition": CONDITION})
    assert to_degradation.json()["condition"] == CONDITION
    back = call(api, "patch", path, {"condition": {"violation_for_minutes": 1}})

    assert back.json()["condition"] == {"violation_for_minutes": 1}
    alerting.rule.refresh_from_db()
    assert (alerting.rule.condition, alerting.rule.degradation_percent) == ("violation", None)
    severity = call(api, "patch", path, {"severity": "info"})
    assert severity.status_code == 200


# --- the configuration file --------------------------------------------------------------


@pytest.mark.parametrize(
    ("condition", "line", "message"),
    [
        (
            "{degradation: {over_percent: 0}}",
            5,
            "“over_percent” must be between 0.1 and 100 % of requests, not 0.",
        ),
        (
            "{degradation: {over_percent: 101}}",
            5,
            "“over_percent” must be between 0.1 and 100 % of requests, not 101.",
        ),
        ("{degradation: {over_percent: 2.25}}", 5, "“over_percent” has at most 1 decimal."),
        (
            "{degradation: {over_percent: lots}}",
            5,
            "“over_percent” must be a percentage of requests, such as 20.",
        ),
        (
            "{degradation: {for_minutes: 5}}",
            5,
            "Degradation condition is missing the required key “over_percent”.",
        ),
        ("{degradation: 20}", 5, "Degradation condition must be a mapping"),
        (
            "{degradation: {over_percent: 20, for_minutes: -1}}",
            5,
            "“for_minutes” must be a whole number of minutes between 0 and 1440.",
        ),
        (
            "{degradation: {over_percent: 20, over: 5}}",
            5,
            "Unknown key “over” in degradation condition.",
        ),
        ("{burn_rate: default, degradation: {over_percent: 20}}", 5, "not both burn_rate"),
        ("{degradation: {over_percent: 20}, factor: 2}", 5, "not both degradation and factor"),
    ],
)
def test_bad_degradation_conditions_are_errors_at_their_lines(
    condition: str, line: int, message: str
) -> None:
    found = errors(alert_file(f"- slug: a\n  pipeline: p\n  condition: {condition}\n"))
    assert any(at == line and message in said for at, said in found), found


def test_a_degradation_rule_is_applied_exported_and_applied_back_unchanged(
    world: TeamWorld, alerting: Alerting, rerank: Stage, tmp_path: Path
) -> None:
    text = """\
        team: acme
        alerts:
          - slug: rerank-degraded
            pipeline: rag-chat
            scope: stage:rerank
            condition:
              degradation: {over_percent: 20, for_minutes: 5}
            severity: critical
          - slug: any-degraded
            pipeline: rag-chat
            condition: {degradation: {over_percent: 12.5}}
    """
    budgets("apply", write(tmp_path, text))
    rule = created()
    assert rule is not None
    assert (rule.condition, rule.stage, rule.degradation_percent) == ("degradation", rerank, 20)
    assert rule.violation_for_minutes == 5
    end_to_end = AlertRule.objects.get(slug="any-degraded")
    assert (end_to_end.scope, end_to_end.degradation_percent) == ("e2e", Decimal("12.5"))

    exported = budgets("export", "--team", "acme")

    assert "degradation:\n        over_percent: 20\n        for_minutes: 5\n" in exported
    assert "degradation:\n        over_percent: 12.5\n        for_minutes: 0\n" in exported
    assert budgets("apply", write(tmp_path, exported)).strip() == "No changes."
    edited = exported.replace("over_percent: 20", "over_percent: 25")
    changed = budgets("apply", write(tmp_path, edited), "--dry-run")
    assert (
        "~ alert rerank-degraded: condition degradation over 20 % for 5 min -> "
        "degradation over 25 % for 5 min"
    ) in changed
