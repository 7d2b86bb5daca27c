"""The alerts API: channels, rules, silences and incidents, for owner, editor, viewer and
outsider; malformed, oversized and cross-team input; secrets only where they belong."""

import json
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
import yaml
from django.utils import timezone
from drf_spectacular.validation import validate_schema
from rest_framework.test import APIClient

from apps.alerts.models import (
    AlertRule,
    AttemptOutcome,
    Channel,
    ConditionKind,
    Notification,
    NotificationEvent,
    NotificationStatus,
    RuleScope,
)
from apps.alerts.services.channels import channel_disable
from tests.alerts.test_pages import (
    Alerting,
    build_alerting,
    make_attempt,
    make_incident,
    make_notification,
)
from tests.builders.alerts import rule
from tests.builders.api import error_of, session_client, token_client
from tests.builders.configuration import make_pipeline
from tests.conftest import TeamWorld

CHANNELS = "/api/v1/channels/"
RULES = "/api/v1/alert-rules/"
INCIDENTS = "/api/v1/incidents/"
MEMBERS = ["owner", "editor", "viewer"]
WRITERS = ["owner", "editor"]


@pytest.fixture
def alerting(world: TeamWorld) -> Alerting:
    return build_alerting(world)


def client(a: Alerting, role: str) -> APIClient:
    return token_client(getattr(a.world, role))


def channel_url(slug: str, suffix: str = "") -> str:
    return f"{CHANNELS}{slug}/{suffix}"


def rule_url(slug: str, suffix: str = "") -> str:
    return f"{RULES}{slug}/{suffix}"


def reads(a: Alerting) -> list[str]:
    return [
        CHANNELS,
        channel_url(a.hook.slug),
        RULES,
        rule_url(a.rule.slug),
        INCIDENTS,
        f"{INCIDENTS}{a.firing.pk}/",
    ]


def writes(a: Alerting) -> list[tuple[str, str, dict[str, Any] | None]]:
    return [
        ("post", CHANNELS, {"slug": "new", "kind": "email", "email_to": ["n@acme.example.com"]}),
        ("patch", channel_url(a.hook.slug), {"name": "Hook"}),
        ("delete", channel_url(a.hook.slug), None),
        ("post", channel_url(a.hook.slug, "test"), None),
        ("post", RULES, {"slug": "new", "pipeline": "rag-chat"}),
        ("patch", rule_url(a.rule.slug), {"severity": "info"}),
        ("delete", rule_url(a.rule.slug), None),
        ("post", rule_url(a.rule.slug, "silence"), {"until": _in(hours=1), "reason": "x"}),
        ("delete", rule_url(a.rule.slug, "silence"), None),
    ]


def _in(**delta: float) -> str:
    return (timezone.now() + timedelta(**delta)).isoformat()


def snapshot() -> tuple[list[Any], ...]:
    return (
        list(Channel.objects.order_by("id").values()),
        list(AlertRule.objects.order_by("id").values()),
        list(Notification.objects.order_by("id").values("id", "status")),
    )


def call(api: APIClient, method: str, path: str, body: Any = None, **extra: Any) -> Any:
    return getattr(api, method)(path, body, format="json", **extra)


# --- who may do what -----------------------------------------------------------------------


@pytest.mark.parametrize("role", MEMBERS)
def test_every_member_reads_every_alert_endpoint(alerting: Alerting, role: str) -> None:
    api = client(alerting, role)
    for path in reads(alerting):
        assert api.get(path).status_code == 200, path


def test_a_browser_session_reads_them_too(alerting: Alerting) -> None:
    assert session_client(alerting.world.viewer).get(INCIDENTS).status_code == 200


def test_a_viewer_gets_403_on_every_write_and_nothing_changes(alerting: Alerting) -> None:
    api = client(alerting, "viewer")
    before = snapshot()
    for method, path, body in writes(alerting):
        response = call(api, method, path, body)
        assert response.status_code == 403, (method, path)
        assert error_of(response)["code"] == "permission_denied"
    assert snapshot() == before


def test_an_outsider_naming_acme_gets_404_everywhere(alerting: Alerting) -> None:
    api = client(alerting, "outsider")
    before = snapshot()
    for path in reads(alerting):
        assert api.get(path, {"team": "acme"}).status_code == 404, path
    for method, path, body in writes(alerting):
        response = call(api, method, f"{path}?team=acme", body)
        assert response.status_code == 404, (method, path)
    assert snapshot() == before


def test_globex_cannot_read_acme_objects_by_id_or_slug_from_its_own_team(
    alerting: Alerting,
) -> None:
    api = client(alerting, "outsider")
    for path in [
        f"{INCIDENTS}{alerting.firing.pk}/",
        channel_url(alerting.mail.slug),
        channel_url(alerting.hook.slug),
        rule_url(alerting.rule.slug),
    ]:
        response = api.get(path)
        assert response.status_code == 404, path
        assert "acme" not in json.dumps(response.json()).lower()
    assert [i["id"] for i in api.get(INCIDENTS).json()["results"]] == [alerting.other_incident.pk]
    assert [c["slug"] for c in api.get(CHANNELS).json()["results"]] == ["globex-hook"]
    assert [r["slug"] for r in api.get(RULES).json()["results"]] == ["globex-rule"]


@pytest.mark.parametrize("path", [CHANNELS, RULES, INCIDENTS])
def test_a_team_with_nothing_yet_lists_nothing(world: TeamWorld, path: str) -> None:
    body = token_client(world.viewer).get(path).json()
    assert (body["count"], body["results"]) == (0, [])


def test_anonymous_gets_401(alerting: Alerting) -> None:
    assert APIClient().get(INCIDENTS).status_code == 401


# --- secrets -------------------------------------------------------------------------------


@pytest.mark.parametrize("role", MEMBERS)
def test_a_list_never_carries_a_secret(alerting: Alerting, role: str) -> None:
    body = client(alerting, role).get(CHANNELS).json()
    assert body["count"] == 2
    assert alerting.hook.secret not in json.dumps(body)
    assert all("secret" not in item for item in body["results"])


@pytest.mark.parametrize("role", WRITERS)
def test_writers_get_the_secret_of_one_channel(alerting: Alerting, role: str) -> None:
    body = client(alerting, role).get(channel_url(alerting.hook.slug)).json()
    assert body["secret"] == alerting.hook.secret
    assert body["url"] == "https://hooks.example.com/services/T00/B00/tok3n"


def test_a_viewer_gets_neither_the_secret_nor_the_webhook_path(alerting: Alerting) -> None:
    api = client(alerting, "viewer")
    for path in reads(alerting):
        text = api.get(path).content.decode()
        assert alerting.hook.secret not in text, path
        assert "tok3n" not in text, path
    body = api.get(channel_url(alerting.hook.slug)).json()
    assert "secret" not in body
    assert body["url"] == "https://hooks.example.com/…"


def test_a_change_answers_without_the_secret(alerting: Alerting) -> None:
    response = call(client(alerting, "owner"), "patch", channel_url("oncall-hook"), {"name": "X"})
    assert response.status_code == 200
    assert "secret" not in response.json()


# --- channels ------------------------------------------------------------------------------


def test_a_channel_reads_with_its_last_delivery(alerting: Alerting) -> None:
    body = client(alerting, "viewer").get(channel_url(alerting.hook.slug)).json()
    assert body["kind"] == "webhook"
    assert body["format"] == "native"
    assert body["enabled"] is True
    last = body["last_notification"]
    assert last["id"] == alerting.failed.pk
    assert last["status"] == "failed"
    assert [a["http_status"] for a in last["delivery_attempts"]] == [503, 404]
    assert last["delivery_attempts"][1]["response_excerpt"] == "no such hook here"


def test_creating_an_email_channel(alerting: Alerting) -> None:
    response = call(
        client(alerting, "editor"),
        "post",
        CHANNELS,
        {"slug": "sre", "name": "SRE", "kind": "email", "email_to": ["a@acme.example.com"]},
    )
    assert response.status_code == 201
    body = response.json()
    assert body["email_to"] == ["a@acme.example.com"]
    assert body["last_notification"] is None
    assert Channel.objects.get(team=alerting.world.team, slug="sre").name == "SRE"


def test_creating_a_webhook_returns_its_fresh_secret_once(alerting: Alerting) -> None:
    api = client(alerting, "owner")
    response = call(
        api,
        "post",
        CHANNELS,
        {
            "slug": "am",
            "kind": "webhook",
            "url": "https://am.example.com/",
            "format": "alertmanager",
        },
    )
    assert response.status_code == 201
    secret = response.json()["secret"]
    assert secret.startswith("whsec_")
    assert Channel.objects.get(slug="am").secret == secret
    assert secret not in api.get(CHANNELS).content.decode()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"slug": "x", "kind": "webhook", "url": "ftp://x.example.com/"}, "url"),
        ({"slug": "x", "kind": "webhook", "url": "not a url"}, "url"),
        ({"slug": "x", "kind": "webhook", "url": "https://x.example.com/" + "a" * 5000}, "url"),
        (
            {"slug": "x", "kind": "webhook", "url": "https://x.example.com/", "format": "xml"},
            "format",
        ),
        (
            {"slug": "x", "kind": "webhook", "url": "https://x.example.com/", "secret": "abc"},
            "secret",
        ),
        ({"slug": "x", "kind": "email", "email_to": ["not-an-address"]}, "email_to"),
        ({"slug": "x", "kind": "email", "email_to": []}, "email_to"),
        ({"slug": "x", "kind": "email", "email_to": "a@example.com"}, "email_to"),
        ({"slug": "x", "kind": "pigeon"}, "kind"),
        ({"slug": "Not A Slug", "kind": "email", "email_to": ["a@example.com"]}, "slug"),
        ({"slug": "team-mail", "kind": "email", "email_to": ["a@example.com"]}, "slug"),
        ({"slug": "x", "kind": "email", "email_to": ["a@example.com"], "colour": "red"}, "colour"),
    ],
)
def test_bad_channel_input_is_a_400_naming_the_field(
    alerting: Alerting, body: dict[str, Any], field: str
) -> None:
    before = snapshot()
    response = call(client(alerting, "owner"), "post", CHANNELS, body)
    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == "invalid"
    assert field in error["fields"], error
    assert snapshot() == before


def test_a_ten_thousand_address_list_is_refused(alerting: Alerting) -> None:
    addresses = [f"user{n}@acme.example.com" for n in range(10_000)]
    response = call(
        client(alerting, "owner"),
        "post",
        CHANNELS,
        {"slug": "everyone", "kind": "email", "email_to": addresses},
    )
    assert response.status_code == 400
    assert "email_to" in error_of(response)["fields"]
    assert not Channel.objects.filter(slug="everyone").exists()


def test_changing_a_channel_keeps_what_is_not_sent(alerting: Alerting) -> None:
    secret = alerting.hook.secret
    response = call(
        client(alerting, "editor"), "patch", channel_url("oncall-hook"), {"format": "slack"}
    )
    assert response.status_code == 200
    alerting.hook.refresh_from_db()
    assert alerting.hook.format == "slack"
    assert alerting.hook.url == "https://hooks.example.com/services/T00/B00/tok3n"
    assert alerting.hook.secret == secret


@pytest.mark.parametrize("field", ["kind", "slug"])
def test_the_kind_and_slug_of_a_channel_cannot_change(alerting: Alerting, field: str) -> None:
    response = call(
        client(alerting, "owner"), "patch", channel_url("team-mail"), {field: "webhook"}
    )
    assert response.status_code == 400
    assert "cannot change" in error_of(response)["fields"][field][0]


def test_enabled_true_puts_a_disabled_channel_back(alerting: Alerting) -> None:
    channel_disable(channel=alerting.hook, reason="gone")
    api = client(alerting, "owner")
    body = api.get(channel_url("oncall-hook")).json()
    assert (body["enabled"], body["disabled_reason"]) == (False, "gone")
    response = call(api, "patch", channel_url("oncall-hook"), {"enabled": True})
    assert response.json()["enabled"] is True
    alerting.hook.refresh_from_db()
    assert alerting.hook.is_enabled


def test_enabled_false_takes_a_channel_out_of_service(alerting: Alerting) -> None:
    response = call(
        client(alerting, "owner"), "patch", channel_url("team-mail"), {"enabled": False}
    )
    assert response.json()["enabled"] is False
    assert "olivia" in response.json()["disabled_reason"]


def test_channels_and_rules_come_in_pages(alerting: Alerting) -> None:
    api = client(alerting, "viewer")
    first = api.get(CHANNELS, {"page_size": 1}).json()
    assert (first["count"], len(first["results"])) == (2, 1)
    assert first["results"][0]["slug"] == "oncall-hook"
    second = api.get(CHANNELS, {"page_size": 1, "page": 2}).json()
    assert second["results"][0]["slug"] == "team-mail"
    assert second["results"][0]["last_notification"]["status"] == "delivered"
    rules = api.get(RULES, {"page_size": 1}).json()
    assert (rules["count"], rules["next"]) == (1, None)
    assert api.get(RULES, {"page": 5}).status_code == 404


def test_deleting_a_channel(alerting: Alerting) -> None:
    response = client(alerting, "editor").delete(channel_url("team-mail"))
    assert response.status_code == 204
    assert not Channel.objects.filter(pk=alerting.mail.pk).exists()


def test_an_unknown_channel_is_404(alerting: Alerting) -> None:
    assert client(alerting, "owner").get(channel_url("nope")).status_code == 404


# --- the test notification -----------------------------------------------------------------


@pytest.mark.parametrize("role", WRITERS)
def test_a_test_is_accepted_with_its_notification(alerting: Alerting, role: str) -> None:
    response = client(alerting, role).post(channel_url("team-mail", "test"))
    assert response.status_code == 202
    body = response.json()
    notification = Notification.objects.get(event=NotificationEvent.TEST)
    assert (body["id"], body["status"]) == (notification.pk, "pending")
    assert body["channel"] == "team-mail"
    assert body["event"] == "test"


def test_a_disabled_channel_takes_no_test(alerting: Alerting) -> None:
    channel_disable(channel=alerting.mail, reason="gone")
    response = client(alerting, "owner").post(channel_url("team-mail", "test"))
    assert response.status_code == 400
    assert not Notification.objects.filter(event=NotificationEvent.TEST).exists()


# --- rules ---------------------------------------------------------------------------------


def test_a_rule_reads_with_slugs_and_its_state(alerting: Alerting) -> None:
    body = client(alerting, "viewer").get(rule_url("retrieval-slow")).json()
    assert body["pipeline"] == "rag-chat"
    assert body["scope"] == "stage:retrieval"
    assert body["condition"] == {"violation_for_minutes": 2}
    assert body["channels"] == ["oncall-hook", "team-mail"]
    (state,) = body["states"]
    assert (state["scope"], state["status"], state["incident"]) == (
        "stage:retrieval",
        "firing",
        alerting.firing.pk,
    )


@pytest.mark.parametrize(
    ("condition", "stored"),
    [
        (None, (ConditionKind.VIOLATION, 0, None, [])),
        (
            {"violation_for_minutes": 2, "factor": 1.5},
            (ConditionKind.VIOLATION, 2, Decimal("1.5"), []),
        ),
        ({"burn_rate": "default"}, (ConditionKind.BURN_RATE, 0, None, [])),
        (
            {
                "burn_rate": [
                    {"long_s": 3600, "short_s": 300, "factor": 14.4, "severity": "critical"}
                ]
            },
            (
                ConditionKind.BURN_RATE,
                0,
                None,
                [{"long_s": 3600, "short_s": 300, "factor": 14.4, "severity": "critical"}],
            ),
        ),
    ],
)
def test_creating_a_rule_with_each_kind_of_condition(
    alerting: Alerting, condition: dict[str, Any] | None, stored: tuple[Any, ...]
) -> None:
    body: dict[str, Any] = {"slug": "new", "pipeline": "rag-chat", "channels": ["team-mail"]}
    if condition is not None:
        body["condition"] = condition
    response = call(client(alerting, "editor"), "post", RULES, body)
    assert response.status_code == 201, response.json()
    created = AlertRule.objects.get(team=alerting.world.team, slug="new")
    kept = (
        created.condition,
        created.violation_for_minutes,
        created.violation_factor,
        created.burn_windows,
    )
    assert kept == stored
    expected = condition or {"violation_for_minutes": 0}
    assert response.json()["condition"] == expected
    assert response.json()["scope"] == "e2e"


def test_a_violation_condition_can_name_one_percentile(alerting: Alerting) -> None:
    condition = {"violation_for_minutes": 1, "percentile": "p95"}
    body = {"slug": "page", "pipeline": "rag-chat", "condition": condition}

    response = call(client(alerting, "editor"), "post", RULES, body)

    assert response.status_code == 201, response.json()
    assert response.json()["condition"] == condition
    assert AlertRule.objects.get(slug="page").violation_percentile == "p95"


def test_a_percentile_the_budget_is_not_set_at_is_refused_as_never_firing(
    alerting: Alerting,
) -> None:
    body = {"slug": "page", "pipeline": "rag-chat", "condition": {"percentile": "p99"}}

    response = call(client(alerting, "editor"), "post", RULES, body)

    assert response.status_code == 400
    [message] = error_of(response)["fields"]["condition"]
    assert message == (
        "Pipeline “rag-chat” has no p99 budget (its budget is at p95): the rule would never fire."
    )


def test_creating_a_rule_for_any_stage_and_for_one(alerting: Alerting) -> None:
    api = client(alerting, "owner")
    any_stage = call(
        api, "post", RULES, {"slug": "each", "pipeline": "rag-chat", "scope": "any_stage"}
    )
    assert any_stage.json()["scope"] == "any_stage"
    one = call(
        api, "post", RULES, {"slug": "one", "pipeline": "rag-chat", "scope": "stage:generation"}
    )
    assert one.status_code == 201
    assert AlertRule.objects.get(slug="one").stage.slug == "generation"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"pipeline": "no-such-pipeline"}, "pipeline"),
        ({"pipeline": "billing"}, "pipeline"),
        ({"pipeline": "rag-chat", "scope": "stage:no-such-stage"}, "scope"),
        ({"pipeline": "rag-chat", "scope": "stage"}, "scope"),
        ({"pipeline": "rag-chat", "scope": "everything"}, "scope"),
        ({"pipeline": "rag-chat", "channels": ["globex-hook"]}, "channels"),
        ({"pipeline": "rag-chat", "channels": ["no-such-channel"]}, "channels"),
        ({"pipeline": "rag-chat", "channels": "team-mail"}, "channels"),
        ({"pipeline": "rag-chat", "condition": {"violation_for_minutes": 1441}}, "condition"),
        ({"pipeline": "rag-chat", "condition": {"violation_for_minutes": "2"}}, "condition"),
        ({"pipeline": "rag-chat", "condition": {"factor": 0.5}}, "condition"),
        ({"pipeline": "rag-chat", "condition": {"factor": 1.234}}, "condition"),
        ({"pipeline": "rag-chat", "condition": {"for": 2}}, "condition"),
        ({"pipeline": "rag-chat", "condition": {}}, "condition"),
        ({"pipeline": "rag-chat", "condition": "2m"}, "condition"),
        ({"pipeline": "rag-chat", "condition": {"burn_rate": "fast"}}, "condition"),
        (
            {"pipeline": "rag-chat", "condition": {"burn_rate": "default", "factor": 2}},
            "condition",
        ),
        (
            {"pipeline": "rag-chat", "condition": {"burn_rate": [{"long_s": 60, "short_s": 3600}]}},
            "condition",
        ),
        (
            {"pipeline": "rag-chat", "scope": "any_stage", "condition": {"burn_rate": "default"}},
            "scope",
        ),
        ({"pipeline": "rag-chat", "severity": "page-everyone"}, "severity"),
        ({"pipeline": "rag-chat", "no_data_after_s": 5}, "no_data_after_s"),
        ({"pipeline": "rag-chat", "renotify": "1h"}, "renotify"),
        ({"pipeline": "rag-chat", "slug": "retrieval-slow"}, "slug"),
    ],
)
def test_bad_rule_input_is_a_400_naming_the_field_without_leaking(
    alerting: Alerting, body: dict[str, Any], field: str
) -> None:
    before = snapshot()
    response = call(client(alerting, "owner"), "post", RULES, {"slug": "new", **body})
    assert response.status_code == 400, response.json()
    error = error_of(response)
    assert field in error["fields"], error
    # Only what the caller sent is echoed: never another team's names.
    assert "Globex" not in json.dumps(error, ensure_ascii=False)
    assert snapshot() == before


def test_another_teams_pipeline_reads_as_unknown(alerting: Alerting) -> None:
    api = client(alerting, "owner")
    theirs = call(api, "post", RULES, {"slug": "x", "pipeline": "billing"})
    missing = call(api, "post", RULES, {"slug": "x", "pipeline": "nothing"})
    assert error_of(theirs)["fields"]["pipeline"] == ["No pipeline “billing” in this team."]
    assert error_of(missing)["fields"]["pipeline"] == ["No pipeline “nothing” in this team."]


def test_another_teams_channel_reads_as_unknown(alerting: Alerting) -> None:
    response = call(
        client(alerting, "owner"),
        "post",
        RULES,
        {"slug": "x", "pipeline": "rag-chat", "channels": ["globex-hook", "nothing"]},
    )
    assert error_of(response)["fields"]["channels"] == [
        "No channel “globex-hook” in this team.",
        "No channel “nothing” in this team.",
    ]


def test_a_burn_rate_needs_an_objective(alerting: Alerting) -> None:
    make_pipeline(alerting.world.team, "plain", name="Plain")
    response = call(
        client(alerting, "owner"),
        "post",
        RULES,
        {"slug": "x", "pipeline": "plain", "condition": {"burn_rate": "default"}},
    )
    assert response.status_code == 400
    assert "objective" in error_of(response)["fields"]["condition"][0]


def test_changing_a_rule_changes_only_what_is_sent(alerting: Alerting) -> None:
    response = call(
        client(alerting, "editor"),
        "patch",
        rule_url("retrieval-slow"),
        {"severity": "info", "channels": ["team-mail"]},
    )
    assert response.status_code == 200
    alerting.rule.refresh_from_db()
    assert alerting.rule.severity == "info"
    assert alerting.rule.stage == alerting.retrieval
    assert alerting.rule.violation_for_minutes == 2
    assert [c.slug for c in alerting.rule.channels.all()] == ["team-mail"]
    alerting.firing.refresh_from_db()
    assert alerting.firing.is_open


def test_a_condition_sent_replaces_the_whole_condition(alerting: Alerting) -> None:
    api = client(alerting, "owner")
    call(api, "patch", rule_url("retrieval-slow"), {"condition": {"factor": 2}})
    alerting.rule.refresh_from_db()
    assert (alerting.rule.violation_for_minutes, alerting.rule.violation_factor) == (
        0,
        Decimal("2"),
    )


def test_changing_the_scope_closes_what_fired_quietly(alerting: Alerting) -> None:
    response = call(
        client(alerting, "owner"), "patch", rule_url("retrieval-slow"), {"scope": "e2e"}
    )
    assert response.json()["scope"] == "e2e"
    alerting.firing.refresh_from_db()
    assert alerting.firing.resolution == "rule_changed"


def test_the_slug_of_a_rule_cannot_change(alerting: Alerting) -> None:
    response = call(client(alerting, "owner"), "patch", rule_url("retrieval-slow"), {"slug": "b"})
    assert response.status_code == 400
    assert "cannot change" in error_of(response)["fields"]["slug"][0]


def test_moving_a_stage_rule_to_a_pipeline_without_that_stage_is_refused(
    alerting: Alerting,
) -> None:
    make_pipeline(alerting.world.team, "agent", name="Agent")
    response = call(
        client(alerting, "owner"), "patch", rule_url("retrieval-slow"), {"pipeline": "agent"}
    )
    assert response.status_code == 400
    assert "scope" in error_of(response)["fields"]


def test_deleting_a_rule_keeps_its_incidents(alerting: Alerting) -> None:
    assert client(alerting, "owner").delete(rule_url("retrieval-slow")).status_code == 204
    assert not AlertRule.objects.filter(pk=alerting.rule.pk).exists()
    body = client(alerting, "viewer").get(f"{INCIDENTS}{alerting.firing.pk}/").json()
    assert body["rule"] == "retrieval-slow"
    assert body["status"] == "resolved"


# --- silences ------------------------------------------------------------------------------


def test_silencing_and_unsilencing_a_rule(alerting: Alerting) -> None:
    api = client(alerting, "editor")
    until = timezone.now() + timedelta(hours=4)
    response = call(
        api,
        "post",
        rule_url("retrieval-slow", "silence"),
        {"until": until.isoformat(), "reason": "Reindex"},
    )
    assert response.status_code == 200
    assert response.json()["silence_reason"] == "Reindex"
    alerting.rule.refresh_from_db()
    assert alerting.rule.silenced_until == until
    assert api.delete(rule_url("retrieval-slow", "silence")).status_code == 204
    alerting.rule.refresh_from_db()
    assert alerting.rule.silenced_until is None


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"until": "2001-01-01T00:00:00Z", "reason": "x"}, "until"),
        ({"until": "2999-01-01T00:00:00Z", "reason": "x"}, "until"),
        ({"until": "tomorrow", "reason": "x"}, "until"),
        ({"reason": "x"}, "until"),
        ({"until": "2999-01-01T00:00:00Z"}, "reason"),
        ({"until": "2999-01-01T00:00:00Z", "reason": "x" * 501}, "reason"),
        ({"until": "2999-01-01T00:00:00Z", "reason": "   "}, "reason"),
    ],
)
def test_a_bad_silence_is_a_400_naming_the_field(
    alerting: Alerting, body: dict[str, Any], field: str
) -> None:
    response = call(client(alerting, "owner"), "post", rule_url("retrieval-slow", "silence"), body)
    assert response.status_code == 400
    assert field in error_of(response)["fields"], error_of(response)
    alerting.rule.refresh_from_db()
    assert alerting.rule.silenced_until is None


# --- incidents -----------------------------------------------------------------------------


def test_incidents_list_newest_first_with_their_delivery_counts(alerting: Alerting) -> None:
    body = client(alerting, "viewer").get(INCIDENTS).json()
    assert body["count"] == 2
    first, second = body["results"]
    assert (first["id"], second["id"]) == (alerting.firing.pk, alerting.resolved.pk)
    assert first["status"] == "firing"
    assert first["scope"] == "stage:retrieval"
    assert first["stage"] == "retrieval"
    assert first["severity"] == "critical"
    assert first["duration_s"] is None
    assert first["notifications"] == {
        "total": 2,
        "delivered": 1,
        "pending": 0,
        "failed": 1,
        "cancelled": 0,
    }
    assert first["facts"]["observed_ms"] == 612.5
    assert first["facts"]["top_stages"][0]["slug"] == "retrieval"
    assert first["facts"]["burn_rates"] == []
    assert second["status"] == "resolved"
    assert second["resolution"] == "recovered"
    assert second["duration_s"] == 1800.0


def test_incidents_filter_by_status_and_pipeline(alerting: Alerting) -> None:
    api = client(alerting, "viewer")
    firing = api.get(INCIDENTS, {"status": "firing"}).json()
    assert [i["id"] for i in firing["results"]] == [alerting.firing.pk]
    resolved = api.get(INCIDENTS, {"status": "resolved", "pipeline": "rag-chat"}).json()
    assert [i["id"] for i in resolved["results"]] == [alerting.resolved.pk]
    assert api.get(INCIDENTS, {"pipeline": "billing"}).json()["count"] == 0


@pytest.mark.parametrize("query", [{"status": "open"}, {"pipeline": "Not a slug!"}])
def test_a_bad_incident_filter_is_a_400(alerting: Alerting, query: dict[str, str]) -> None:
    response = client(alerting, "viewer").get(INCIDENTS, query)
    assert response.status_code == 400
    assert set(error_of(response)["fields"]) == set(query)


def test_incidents_come_in_pages(alerting: Alerting) -> None:
    start = timezone.now() - timedelta(days=10)
    for n in range(60):
        make_incident(
            alerting.rule,
            started_at=start + timedelta(minutes=n),
            resolved_at=start + timedelta(minutes=n, seconds=10),
        )
    api = client(alerting, "viewer")
    first = api.get(INCIDENTS).json()
    assert first["count"] == 62
    assert len(first["results"]) == 50
    assert first["next"] is not None
    second = api.get(INCIDENTS, {"page": 2}).json()
    assert len(second["results"]) == 12
    assert len(api.get(INCIDENTS, {"page_size": 5}).json()["results"]) == 5


def test_an_incident_reads_with_every_notification_and_attempt(alerting: Alerting) -> None:
    pending = make_notification(
        alerting.firing,
        alerting.mail,
        status=NotificationStatus.PENDING,
        event=NotificationEvent.REMINDER,
        at=timezone.now(),
    )
    make_attempt(pending, 1, outcome=AttemptOutcome.RETRY, http_status=None, error="timed out")
    body = client(alerting, "viewer").get(f"{INCIDENTS}{alerting.firing.pk}/").json()
    assert body["rule"] == "retrieval-slow"
    assert body["rule_name"] == "Retrieval slow"
    assert body["pipeline"] == "rag-chat"
    ids = [n["id"] for n in body["notifications"]]
    assert ids == [alerting.delivered.pk, alerting.failed.pk, pending.pk]
    failed = body["notifications"][1]
    assert failed["channel"] == "oncall-hook"
    assert [a["number"] for a in failed["delivery_attempts"]] == [1, 2]
    assert [a["outcome"] for a in failed["delivery_attempts"]] == ["retry", "permanent"]
    assert failed["delivery_attempts"][0]["error"] == "HTTP 503 from receiver"
    assert failed["delivery_attempts"][0]["latency_ms"] == 42.5
    assert body["notifications"][2]["delivery_attempts"][0]["error"] == "timed out"


def test_an_unknown_incident_is_404(alerting: Alerting) -> None:
    assert client(alerting, "owner").get(f"{INCIDENTS}999999/").status_code == 404


def test_a_burn_rate_incident_reads_its_rates(alerting: Alerting) -> None:
    burn = rule(
        alerting.pipeline,
        [],
        slug="burning",
        condition=ConditionKind.BURN_RATE,
        scope=RuleScope.E2E,
    )
    rates = [
        {
            "long_window_s": 3600,
            "short_window_s": 300,
            "factor": 14.4,
            "long_burn_rate": 20.1,
            "short_burn_rate": None,
            "severity": "critical",
        }
    ]
    incident = make_incident(
        burn,
        started_at=timezone.now(),
        facts={"objective_target": 99.0, "objective_threshold_ms": 4000, "burn_rates": rates},
    )
    body = client(alerting, "viewer").get(f"{INCIDENTS}{incident.pk}/").json()
    assert body["scope"] == "e2e"
    assert body["facts"]["burn_rates"] == rates
    assert body["facts"]["percentile"] is None
    assert body["facts"]["example_trace_ids"] == []


# --- the schema ----------------------------------------------------------------------------


def test_the_schema_documents_every_alert_operation(db: None) -> None:
    schema = yaml.safe_load(APIClient().get("/api/schema/").content)
    validate_schema(schema)
    paths = schema["paths"]
    expected = {
        "/api/v1/channels/": {"get", "post"},
        "/api/v1/channels/{channel_slug}/": {"get", "patch", "delete"},
        "/api/v1/channels/{channel_slug}/test": {"post"},
        "/api/v1/alert-rules/": {"get", "post"},
        "/api/v1/alert-rules/{rule_slug}/": {"get", "patch", "delete"},
        "/api/v1/alert-rules/{rule_slug}/silence": {"post", "delete"},
        "/api/v1/incidents/": {"get"},
        "/api/v1/incidents/{incident_id}/": {"get"},
    }
    for path, methods in expected.items():
        assert set(paths[path]) == methods, path
    test = paths["/api/v1/channels/{channel_slug}/test"]["post"]["responses"]
    assert {"202", "403", "404"} <= set(test)
    listed = schema["components"]["schemas"]["Channel"]["properties"]
    assert "secret" not in listed
    assert "secret" in schema["components"]["schemas"]["ChannelWithSecret"]["properties"]
    params = {p["name"] for p in paths["/api/v1/incidents/"]["get"]["parameters"]}
    assert {"status", "pipeline", "page", "page_size", "team"} <= params
