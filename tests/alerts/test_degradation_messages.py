"""What a degradation alert says, in every channel: the native webhook, Slack and
Alertmanager bodies received by a real HTTP server, the e-mail received by a real SMTP
server (aiosmtpd), the incident page and the API, firing and resolved."""

import json
from datetime import timedelta
from typing import Any

import pytest
from django.urls import reverse

from apps.alerts.models import Channel, Notification, NotificationEvent
from apps.alerts.services.delivery import notification_deliver
from apps.alerts.services.evaluation import alerts_evaluate
from apps.ingest.models import Trace
from apps.pipelines.models import Pipeline, Stage
from tests.alerts.degradations import degradation_rule, traffic
from tests.alerts.receivers import HttpReceiver, SmtpReceiver
from tests.builders.alerts import NOW, confirmed, email_channel, webhook_channel
from tests.builders.api import token_client
from tests.builders.configuration import make_pipeline, make_stage, verify_email
from tests.builders.evaluation_rollups import hex_id
from tests.conftest import TeamWorld, client_for

MINUTE = timedelta(minutes=1)
FORMATS = ("native", "slack", "alertmanager")
FIRING = (
    "rag-chat · stage rerank degraded on 34.0 % of 50 requests over 5 min (threshold 20 %): "
    "15 fallback, 2 skip"
)
RESOLVED = (
    "rag-chat · stage rerank degraded on 8.5 % of 200 requests over 5 min, back under its "
    "20 % threshold"
)


@pytest.fixture
def rerank(world: TeamWorld) -> tuple[Pipeline, Stage]:
    pipeline = make_pipeline(world.team, "rag-chat", evaluation_window_s=300, min_samples=20)
    return pipeline, make_stage(pipeline, "rerank", name="Cross-encoder rerank", budget_ms=150)


@pytest.fixture
def channels(
    world: TeamWorld, http_receiver: HttpReceiver, allow_loopback: None
) -> dict[str, Channel]:
    verify_email(world.owner)  # subjects name the pipeline and stage for verified accounts
    receiver = http_receiver.url
    hooks = {
        fmt: webhook_channel(world.team, f"{fmt}-hook", url=receiver(f"/{fmt}"), format=fmt)
        for fmt in FORMATS
    }
    return {**hooks, "email": confirmed(email_channel(world.team, email_to=["oncall@acme.io"]))}


def deliver(event: str) -> None:
    for notification in Notification.objects.filter(event=event).order_by("pk"):
        assert notification_deliver(notification_id=notification.pk, now=NOW + MINUTE).outcome == (
            "success"
        )


def bodies(receiver: HttpReceiver, since: int = 0) -> dict[str, Any]:
    """The bodies received from the ``since``-th on, by format (the path)."""
    return {r.path.strip("/"): json.loads(r.body) for r in receiver.requests[since:]}


def fire(pipeline: Pipeline, stage: Stage, channels: dict[str, Channel]) -> list[Trace]:
    degradation_rule(pipeline, list(channels.values()), stage=stage, minutes=0)
    slowest = traffic(
        pipeline,
        NOW - MINUTE,
        requests=50,
        degraded={stage: {"fallback": 15, "skip": 2}},
        examples=2,
    )
    alerts_evaluate(now=NOW)
    return slowest


def test_every_channel_says_the_rate_the_requests_and_the_decisions(
    rerank: tuple[Pipeline, Stage],
    channels: dict[str, Channel],
    http_receiver: HttpReceiver,
    smtp_server: SmtpReceiver,
) -> None:
    pipeline, stage = rerank
    slowest = fire(pipeline, stage, channels)
    deliver(NotificationEvent.FIRING)

    sent = bodies(http_receiver)
    native = sent["native"]
    assert native["type"] == "alert.firing"
    assert native["rule"]["condition"] == "degradation"
    assert native["summary"] == FIRING
    assert native["stage"] == {"slug": "rerank", "name": "Cross-encoder rerank"}
    assert native["percentile"] is None
    assert native["window_s"] == 300
    assert native["degradation"] == {
        "rate_percent": 34.0,
        "peak_rate_percent": 34.0,
        "threshold_percent": 20.0,
        "degraded": 17,
        "requests": 50,
        "by_action": {"fallback": 15, "skip": 2},
        "by_stage": {},
    }
    assert native["example_trace_ids"] == [hex_id(t) for t in slowest]
    assert native["links"]["traces"][0].endswith(f"/traces/{hex_id(slowest[0])}/")

    slack = sent["slack"]
    assert slack["text"] == f"WARNING: {FIRING}"
    shown = json.dumps(slack["blocks"], ensure_ascii=False)
    assert "*Degraded*\\n34.0 % of 50 requests" in shown
    assert "*Threshold*\\n20 %" in shown
    assert "*Decisions*\\n15 fallback, 2 skip" in shown
    assert "run-time clients degraded 17 of 50 requests (34.0 %) over the last 5 min" in shown

    (alert,) = sent["alertmanager"]["alerts"]
    assert alert["status"] == "firing"
    assert alert["labels"]["stage"] == "rerank"
    assert "percentile" not in alert["labels"]
    assert alert["annotations"]["summary"] == FIRING
    assert "Decisions: 15 fallback, 2 skip." in alert["annotations"]["description"]

    (mail,) = smtp_server.messages
    assert mail.subject == f"[WARNING] {FIRING}"
    body = mail.part("text/plain")
    assert "Degraded:  34.0 % of 50 requests (17) over the last 5 min" in body
    assert "Threshold: 20 %" in body
    assert "Decisions: 15 fallback, 2 skip" in body
    assert "Degraded requests, slowest first:" in body
    assert f"/traces/{hex_id(slowest[0])}/" in body
    html = mail.part("text/html")
    assert "34.0 % of 50 requests" in html
    assert "15 fallback, 2 skip" in html

    # The rate falls to 17 of 200 requests: the same channels hear it resolved.
    traffic(pipeline, NOW - MINUTE + timedelta(seconds=10), requests=150)
    alerts_evaluate(now=NOW + timedelta(seconds=10))
    deliver(NotificationEvent.RESOLVED)

    latest = bodies(http_receiver, since=3)
    assert latest["native"]["type"] == "alert.resolved"
    assert latest["native"]["summary"] == RESOLVED
    assert latest["native"]["degradation"]["rate_percent"] == 8.5
    assert latest["native"]["degradation"]["peak_rate_percent"] == 34.0
    assert latest["slack"]["text"] == f"Resolved after 10 s: {RESOLVED}"
    assert "*Degraded when it resolved*\\n8.5 % of 200 requests" in json.dumps(
        latest["slack"]["blocks"], ensure_ascii=False
    )
    assert latest["alertmanager"]["status"] == "resolved"
    assert latest["alertmanager"]["alerts"][0]["annotations"]["summary"] == RESOLVED
    closing = smtp_server.messages[-1]
    assert closing.subject.startswith(f"[RESOLVED] {RESOLVED}")
    assert "Threshold: 20 % of requests degraded; 8.5 % of 200 when it resolved" in closing.part(
        "text/plain"
    )


def test_an_unverified_account_subject_names_no_stage(
    world: TeamWorld, rerank: tuple[Pipeline, Stage], smtp_server: SmtpReceiver
) -> None:
    pipeline, stage = rerank
    fire(pipeline, stage, {"email": confirmed(email_channel(world.team))})
    deliver(NotificationEvent.FIRING)

    (mail,) = smtp_server.messages
    assert mail.subject.startswith("[WARNING] Latency alert #")
    assert mail.subject.endswith(
        "degraded on 34.0 % of 50 requests over 5 min (threshold 20 %): 15 fallback, 2 skip"
    )
    assert "rerank" not in mail.subject


def test_the_incident_page_and_the_api_show_the_degradation(
    world: TeamWorld, rerank: tuple[Pipeline, Stage]
) -> None:
    pipeline, stage = rerank
    slowest = fire(pipeline, stage, {})
    incident = pipeline.incidents.get()

    path = reverse("alerts:incident", args=["acme", incident.pk])
    page = client_for(world.viewer).get(path).content.decode()
    assert FIRING in page
    assert "Degraded requests" in page
    assert "34.0 %" in page
    assert "17 of 50 requests · threshold 20 %" in page
    assert '<td>fallback</td><td class="num">15</td>' in page
    assert hex_id(slowest[0]) in page

    body = token_client(world.viewer).get(f"/api/v1/incidents/{incident.pk}/").json()
    assert body["summary"] == FIRING
    assert body["facts"]["degradation"]["by_action"] == {"fallback": 15, "skip": 2}
    assert body["facts"]["example_trace_ids"] == [hex_id(t) for t in slowest]
    assert client_for(world.outsider).get(path).status_code == 404
