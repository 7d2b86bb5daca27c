"""Webhook bodies: native JSON, Alertmanager's version 4 message, and a Slack message."""

import json
import re
from datetime import datetime
from typing import Any

import pytest
from django.utils import timezone
from pytest_django import Settings

from apps.alerts.formats import RENDERERS, render
from apps.alerts.models import Channel, ChannelKind, WebhookFormat
from apps.alerts.payload_types import Payload
from apps.alerts.services import payloads
from apps.alerts.services.channels import channel_create
from tests.builders.deliveries import (
    burn_rate_payload,
    firing_payload,
    resolved_payload,
    trial_payload,
)
from tests.conftest import TeamWorld

RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?Z$")
ZERO_TIME = "0001-01-01T00:00:00Z"


@pytest.fixture
def channels(world: TeamWorld) -> dict[str, Channel]:
    return {
        fmt: channel_create(
            team=world.team,
            slug=f"{fmt}-hook",
            kind=ChannelKind.WEBHOOK,
            url="https://hooks.example.com/x",
            format=fmt,
        )
        for fmt in WebhookFormat.values
    }


def _decoded(channel: Channel, payload: Payload) -> Any:
    body, content_type = render(channel, payload)
    assert content_type == "application/json"
    return json.loads(body.decode("utf-8"))


def test_every_format_has_a_renderer() -> None:
    assert set(RENDERERS) == set(WebhookFormat.values)


# --- native


def test_native_is_the_payload_as_compact_utf8_json(channels: dict[str, Channel]) -> None:
    payload = firing_payload(pipeline={"slug": "rag-chat", "name": "Réponse · chat"})
    body, content_type = render(channels["native"], payload)
    assert content_type == "application/json"
    assert json.loads(body) == payload
    assert "Réponse · chat".encode() in body
    assert body == json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()


# --- Alertmanager


def test_alertmanager_message_has_every_key_of_version_4(
    channels: dict[str, Channel], settings: Settings
) -> None:
    settings.SITE_URL = "https://budgets.example.com"
    message = _decoded(channels["alertmanager"], firing_payload())
    assert set(message) == {
        "version",
        "groupKey",
        "truncatedAlerts",
        "status",
        "receiver",
        "groupLabels",
        "commonLabels",
        "commonAnnotations",
        "externalURL",
        "alerts",
    }
    assert message["version"] == "4"
    assert message["truncatedAlerts"] == 0
    assert message["status"] == "firing"
    assert message["receiver"] == "alertmanager-hook"
    assert message["externalURL"] == "https://budgets.example.com"
    assert message["groupLabels"] == {
        "alertname": "retrieval-slow",
        "pipeline": "rag-chat",
        "stage": "retrieval",
    }
    assert message["groupKey"] == (
        '{}/{team="acme"}:{alertname="retrieval-slow", pipeline="rag-chat", stage="retrieval"}'
    )
    for mapping in ("groupLabels", "commonLabels", "commonAnnotations"):
        assert all(isinstance(v, str) for v in message[mapping].values())

    (alert,) = message["alerts"]
    assert set(alert) == {
        "status",
        "labels",
        "annotations",
        "startsAt",
        "endsAt",
        "generatorURL",
        "fingerprint",
    }
    assert alert["status"] == "firing"
    assert alert["labels"] == {
        "alertname": "retrieval-slow",
        "team": "acme",
        "pipeline": "rag-chat",
        "stage": "retrieval",
        "severity": "critical",
        "percentile": "p95",
    }
    assert message["commonLabels"] == alert["labels"]
    assert message["commonAnnotations"] == alert["annotations"]
    annotations = alert["annotations"]
    assert set(annotations) == {"summary", "description", "dashboard", "incident"}
    assert annotations["summary"] == "rag-chat · stage retrieval p95 812 ms over its 500 ms budget"
    assert "812.4 ms" in annotations["description"]
    assert "312.4 ms over its 500 ms budget" in annotations["description"]
    assert "retrieval 62 %" in annotations["description"]
    assert annotations["dashboard"].endswith("/pipelines/rag-chat/stages/retrieval/")
    assert annotations["incident"].endswith("/alerts/incidents/41/")
    assert alert["generatorURL"] == annotations["dashboard"]
    assert alert["startsAt"] == "2026-03-02T10:12:00Z"
    assert RFC3339.match(alert["startsAt"])
    assert alert["endsAt"] == ZERO_TIME
    assert re.fullmatch(r"[0-9a-f]{16}", alert["fingerprint"])


def test_alertmanager_resolved_has_its_end_time(channels: dict[str, Channel]) -> None:
    message = _decoded(channels["alertmanager"], resolved_payload())
    (alert,) = message["alerts"]
    assert message["status"] == alert["status"] == "resolved"
    # Go writes fractions without trailing zeros.
    assert alert["endsAt"] == "2026-03-02T10:54:00.5Z"
    assert RFC3339.match(alert["endsAt"])
    ends = datetime.fromisoformat(alert["endsAt"].replace("Z", "+00:00"))
    starts = datetime.fromisoformat(alert["startsAt"].replace("Z", "+00:00"))
    assert (ends - starts).total_seconds() == 2520.5
    assert "It fired for 42 min 1 s." in alert["annotations"]["description"]


def test_alertmanager_fingerprint_is_stable_per_rule_and_scope(
    channels: dict[str, Channel],
) -> None:
    one = payloads.fingerprint(team_slug="acme", rule_slug="retrieval-slow", scope_key="stage:7")
    assert one == payloads.fingerprint(
        team_slug="acme", rule_slug="retrieval-slow", scope_key="stage:7"
    )
    assert one != payloads.fingerprint(
        team_slug="acme", rule_slug="retrieval-slow", scope_key="stage:8"
    )
    assert one != payloads.fingerprint(team_slug="acme", rule_slug="e2e-slow", scope_key="stage:7")
    firing, resolved = firing_payload(), resolved_payload()
    for payload in (firing, resolved):
        payload["incident"]["fingerprint"] = one
    fingerprints = {
        _decoded(channels["alertmanager"], p)["alerts"][0]["fingerprint"]
        for p in (firing, resolved)
    }
    assert fingerprints == {one}


def test_alertmanager_end_to_end_and_burn_rate_labels(channels: dict[str, Channel]) -> None:
    e2e = firing_payload(stage=None)
    assert _decoded(channels["alertmanager"], e2e)["alerts"][0]["labels"]["stage"] == "e2e"
    burn = burn_rate_payload()
    labels = _decoded(channels["alertmanager"], burn)["alerts"][0]["labels"]
    # Alertmanager has no empty labels: no percentile rather than "".
    assert "percentile" not in labels
    assert labels["stage"] == "e2e"


# --- Slack


def _slack_text(message: dict[str, Any]) -> str:
    parts = [message["text"]]
    for block in message["blocks"]:
        if "text" in block:
            parts.append(block["text"]["text"])
        parts += [f["text"] for f in block.get("fields", [])]
        parts += [e["text"] for e in block.get("elements", [])]
    return "\n".join(parts)


def test_slack_shows_the_numbers(channels: dict[str, Channel]) -> None:
    message = _decoded(channels["slack"], firing_payload())
    assert message["text"] == "CRITICAL: rag-chat · stage retrieval p95 812.4 ms &gt; 500 ms budget"
    shown = _slack_text(message)
    assert ":rotating_light:" in shown
    assert "*Severity*\ncritical" in shown
    assert "*Pipeline*\nRAG chat answer" in shown
    assert "*Stage*\nRetrieval" in shown
    assert "*p95 observed*\n812.4 ms" in shown
    assert "*Budget*\n500 ms" in shown
    assert "*Over by*\n312.4 ms" in shown
    assert (
        "*Retrieval* 62 % of the critical path, p95 812.4 ms of 500 ms (over by 312.4 ms)" in shown
    )
    assert "*Generation* 21 % of the critical path, p95 1.43 s of 1.8 s" in shown
    assert (
        "<http://localhost:8000/teams/acme/pipelines/rag-chat/stages/retrieval/|Dashboard>" in shown
    )
    assert "<http://localhost:8000/teams/acme/alerts/incidents/41/|Incident>" in shown
    assert "|Trace 1>" in shown
    assert "|Trace 2>" in shown
    assert all(block["type"] in ("section", "context") for block in message["blocks"])


def test_slack_resolved_says_resolved_and_for_how_long(channels: dict[str, Channel]) -> None:
    message = _decoded(channels["slack"], resolved_payload())
    assert message["text"] == (
        "Resolved after 42 min 1 s: rag-chat · stage retrieval p95 431.2 ms, "
        "back under its 500 ms budget"
    )
    shown = _slack_text(message)
    assert ":white_check_mark:" in shown
    assert "*p95 when it resolved*\n431.2 ms" in shown
    assert "over its" not in shown


def test_slack_test_message_says_so(channels: dict[str, Channel]) -> None:
    message = _decoded(channels["slack"], trial_payload())
    assert message["text"] == (
        "Test notification: rag-chat · stage retrieval p95 812.4 ms &gt; 500 ms budget "
        "(example figures)"
    )
    assert "nothing is wrong, and its figures are examples" in _slack_text(message)


def test_slack_reminder_says_still_firing(channels: dict[str, Channel]) -> None:
    message = _decoded(channels["slack"], firing_payload(reminder=2))
    assert message["text"].startswith("CRITICAL (still firing, reminder 2): ")


def test_slack_burn_rate_shows_the_rates(channels: dict[str, Channel]) -> None:
    message = _decoded(channels["slack"], burn_rate_payload())
    assert message["text"] == (
        "CRITICAL: rag-chat · objective burning 16.2x the allowed rate over 1 h and 5 min"
    )
    assert "*Burn rate over 1 h*\n16.2x (limit 14.4x)" in _slack_text(message)


def test_slack_escapes_names_so_nobody_is_pinged(channels: dict[str, Channel]) -> None:
    payload = firing_payload(pipeline={"slug": "rag-chat", "name": "<!channel> & co"})
    shown = _slack_text(_decoded(channels["slack"], payload))
    assert "<!channel>" not in shown
    assert "&lt;!channel&gt; &amp; co" in shown


# --- what the services build renders in every format


@pytest.mark.parametrize("fmt", WebhookFormat.values)
def test_a_test_payload_from_the_service_renders(
    world: TeamWorld, channels: dict[str, Channel], fmt: str
) -> None:
    payload = payloads.payload_for_channel_test(
        team=world.team, channel_slug="oncall", message_id="msg_x", now=timezone.now()
    )
    assert _decoded(channels[fmt], payload)
