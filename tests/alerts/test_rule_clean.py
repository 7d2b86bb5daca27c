"""An alert rule's values are checked by ``alert_rule_clean`` alone: its bounds are the
model's constants, and the form, the API and the configuration file say the same thing
about the same wrong value, each under its own name for the field."""

from decimal import Decimal
from typing import Any

import pytest
from django.core.exceptions import ValidationError

from apps.alerts.models import AlertRule, ConditionKind, RuleScope
from apps.alerts.rule_clean import OUT_OF_RANGE, alert_rule_clean
from tests.alerts.test_api import RULES, call, client
from tests.alerts.test_config_as_code import alert_file, errors
from tests.alerts.test_pages import Alerting, build_alerting, html_of, rule_data, url
from tests.builders.api import error_of
from tests.conftest import TeamWorld, client_for


def refused(values: dict[str, Any]) -> dict[str, list[ValidationError]]:
    with pytest.raises(ValidationError) as caught:
        alert_rule_clean(values)
    return caught.value.error_dict


@pytest.mark.parametrize(
    ("field", "good", "bad"),
    [
        ("violation_for_minutes", [0, AlertRule.MAX_VIOLATION_MINUTES], [-1, 1441, 2.5, "2", True]),
        ("renotify_minutes", [0, AlertRule.MAX_RENOTIFY_MINUTES], [-1, 10081, None]),
        ("no_data_after_s", [None, 30, 86400], [29, 86401, 60.0]),
        ("violation_factor", [None, 1, 100, 1.5, "2.25"], [0.99, 100.01, 1.234, "x", True]),
        ("severity", ["info", "critical"], ["page", None]),
        ("scope", ["e2e", "any_stage", "stage"], ["everything"]),
        ("violation_percentile", ["", None, "p50", "p99"], ["p98", "P99", 99]),
    ],
)
def test_each_bound_holds_at_its_edges(field: str, good: list[Any], bad: list[Any]) -> None:
    for value in good:
        alert_rule_clean({field: value})
    for value in bad:
        assert list(refused({field: value})) == [field], value


def test_an_out_of_range_error_carries_its_bounds_for_a_door_to_word() -> None:
    [error] = refused({"no_data_after_s": 5})["no_data_after_s"]
    assert error.code == OUT_OF_RANGE
    assert error.params == {"low": 30, "high": 86400, "unit": "s"}


def test_every_wrong_field_is_named_at_once_and_values_come_back_as_stored() -> None:
    assert set(refused({"violation_for_minutes": -1, "renotify_minutes": -1})) == {
        "violation_for_minutes",
        "renotify_minutes",
    }
    assert alert_rule_clean({"violation_factor": "1.5"}) == {"violation_factor": Decimal("1.5")}


def test_a_burn_rate_condition_is_end_to_end() -> None:
    messages = refused({"condition": ConditionKind.BURN_RATE, "scope": RuleScope.ANY_STAGE})
    assert "use scope e2e" in messages["scope"][0].messages[0]


def test_a_percentile_belongs_to_a_violation_condition() -> None:
    messages = refused({"condition": ConditionKind.BURN_RATE, "violation_percentile": "p99"})
    assert "a burn rate watches the objective" in messages["violation_percentile"][0].messages[0]
    assert alert_rule_clean({"violation_percentile": None}) == {"violation_percentile": ""}


@pytest.fixture
def alerting(world: TeamWorld) -> Alerting:
    return build_alerting(world)


@pytest.mark.parametrize(
    ("form", "api", "yaml", "said"),
    [
        (
            {"violation_for_minutes": "1441"},
            {"condition": {"violation_for_minutes": 1441}},
            "condition: {violation_for_minutes: 1441}",
            "must be a whole number of minutes between 0 and 1440.",
        ),
        (
            {"violation_factor": "0.5"},
            {"condition": {"factor": 0.5}},
            "condition: {violation_for_minutes: 0, factor: 0.5}",
            "must be between 1 and 100 times the budget, not 0.5.",
        ),
        (
            {"violation_factor": "1.234"},
            {"condition": {"factor": 1.234}},
            "condition: {violation_for_minutes: 0, factor: 1.234}",
            "has at most 2 decimals.",
        ),
        (
            {"violation_percentile": "p98"},
            {"condition": {"percentile": "p98"}},
            "condition: {violation_for_minutes: 0, percentile: p98}",
            "must be one of p50, p90, p95, p99, or empty for any percentile.",
        ),
        (
            {"condition": "degradation", "degradation_percent": "0", "scope": "e2e", "stage": ""},
            {"condition": {"degradation": {"over_percent": 0}}},
            "condition: {degradation: {over_percent: 0}}",
            "must be between 0.1 and 100 % of requests, not 0.",
        ),
    ],
)
def test_the_form_the_api_and_the_file_say_the_same(
    alerting: Alerting, form: dict[str, str], api: dict[str, Any], yaml: str, said: str
) -> None:
    response = client_for(alerting.world.owner).post(
        url("rule_create"), rule_data(alerting, **form)
    )
    assert response.status_code == 422
    assert said.capitalize() in html_of(response)

    body = {"slug": "new", "pipeline": alerting.pipeline.slug, **api}
    answer = call(client(alerting, "owner"), "post", RULES, body)
    assert answer.status_code == 400
    assert any(said in message for message in error_of(answer)["fields"]["condition"])

    [(_, message)] = errors(alert_file(f"- slug: a\n  pipeline: p\n  {yaml}\n"))
    assert said in message
