"""Payloads and notifications for the transport and format tests, with known numbers."""

import copy
import uuid
from typing import Any, cast

from django.utils import timezone

from apps.alerts.formats.text import TEST_PREFIX
from apps.alerts.models import Channel, Notification, NotificationEvent
from apps.alerts.payload_types import Payload

SITE = "http://localhost:8000"
TRACE_IDS = ["4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7a3ce929d0e0e4736"]

_FIRING: dict[str, Any] = {
    "type": "alert.firing",
    "test": False,
    "id": "msg_0",
    "created_at": "2026-03-02T10:15:30.250000Z",
    "reminder": 0,
    "team": {"slug": "acme", "name": "Acme"},
    "rule": {
        "slug": "retrieval-slow",
        "name": "Retrieval too slow",
        "severity": "critical",
        "condition": "violation",
        "scope": "stage:retrieval",
    },
    "incident": {
        "id": 41,
        "status": "firing",
        "started_at": "2026-03-02T10:12:00Z",
        "ended_at": None,
        "resolution": None,
        "duration_s": None,
        "fingerprint": "3f2a9c0d1e4b5a67",
    },
    "pipeline": {"slug": "rag-chat", "name": "RAG chat answer"},
    "stage": {"slug": "retrieval", "name": "Retrieval"},
    "percentile": "p95",
    "observed_ms": 812.4,
    "peak_ms": 812.4,
    "budget_ms": 500,
    "over_by_ms": 312.4,
    "window_s": 300,
    "burn_rates": [],
    "top_stages": [
        {
            "slug": "retrieval",
            "name": "Retrieval",
            "share": 0.62,
            "percentile": "p95",
            "observed_ms": 812.4,
            "budget_ms": 500,
            "over_by_ms": 312.4,
        },
        {
            "slug": "generation",
            "name": "Generation",
            "share": 0.21,
            "percentile": "p95",
            "observed_ms": 1430.0,
            "budget_ms": 1800,
            "over_by_ms": None,
        },
    ],
    "example_trace_ids": TRACE_IDS,
    "links": {
        "dashboard": f"{SITE}/teams/acme/pipelines/rag-chat/stages/retrieval/",
        "incident": f"{SITE}/teams/acme/alerts/incidents/41/",
        "traces": [f"{SITE}/teams/acme/traces/{t}/" for t in TRACE_IDS],
    },
    "summary": "rag-chat · stage retrieval p95 812 ms over its 500 ms budget",
}


def firing_payload(**changes: Any) -> Payload:
    payload = copy.deepcopy(_FIRING)
    payload.update(changes)
    return cast(Payload, payload)


def resolved_payload() -> Payload:
    """Resolved on a p95 of 431.2 ms, back under its 500 ms budget."""
    payload = firing_payload(
        type="alert.resolved",
        observed_ms=431.2,
        over_by_ms=None,
        summary="rag-chat · stage retrieval p95 431 ms, back under its 500 ms budget",
    )
    incident = payload["incident"]
    incident["status"] = "resolved"
    incident["ended_at"] = "2026-03-02T10:54:00.5Z"
    incident["resolution"] = "recovered"
    incident["duration_s"] = 2520.5
    return payload


def trial_payload(channel_slug: str = "oncall") -> Payload:
    payload = firing_payload(type="alert.test", test=True)
    rule = payload["rule"]
    rule["slug"], rule["name"], rule["severity"] = "test", f"Test of channel {channel_slug}", "info"
    payload["incident"]["id"] = None
    payload["links"]["incident"] = None
    payload["summary"] = TEST_PREFIX + payload["summary"]
    return payload


def burn_rate_payload() -> Payload:
    """A burn-rate rule over the objective: no stage, no percentile."""
    return firing_payload(
        percentile=None,
        observed_ms=None,
        budget_ms=None,
        over_by_ms=None,
        stage=None,
        burn_rates=[
            {
                "long_window_s": 3600,
                "short_window_s": 300,
                "factor": 14.4,
                "long_burn_rate": 16.2,
                "short_burn_rate": 20.0,
                "severity": "critical",
            }
        ],
        summary="rag-chat burns its objective (99 % under 4000 ms) at 16.2 times the allowed "
        "rate over 1 h",
    )


def notification_for(
    channel: Channel, payload: Payload | None = None, *, event: str = NotificationEvent.FIRING
) -> Notification:
    message_id = f"msg_{uuid.uuid4().hex}"
    body = copy.deepcopy(payload or firing_payload())
    body["id"] = message_id
    now = timezone.now()
    return Notification.objects.create(
        team=channel.team,
        channel=channel,
        event=event,
        key=f"test:{message_id}",
        message_id=message_id,
        payload=body,
        next_attempt_at=now,
        created_at=now,
    )
