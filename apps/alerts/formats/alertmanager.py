"""The body Prometheus Alertmanager's webhook receiver sends (version "4"), for one alert.

Tools written for Alertmanager (alert routers, paging bridges, chat bots) can take our
notifications unchanged: the same keys, label and annotation maps of strings, RFC 3339
times with ``endsAt`` at Go's zero time while the alert fires, and a 16-hex fingerprint
that stays the same for one rule and scope. Each notification carries one alert, grouped
by rule and scope; the group key reads like Alertmanager's for a route matching the team.
"""

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from django.conf import settings

from apps.alerts.formats import text
from apps.alerts.models import Channel
from apps.alerts.payload_types import Payload

VERSION = "4"
CONTENT_TYPE = "application/json"
# Go's zero time.Time, which Alertmanager sends as endsAt while an alert is firing.
ZERO_TIME = "0001-01-01T00:00:00Z"
_GROUP_BY = ("alertname", "pipeline", "stage")


def rfc3339(moment: str | None) -> str:
    """An ISO 8601 time as Go writes a time.Time: UTC, "Z", fractions without trailing 0s."""
    if not moment:
        return ZERO_TIME
    parsed = datetime.fromisoformat(moment.replace("Z", "+00:00")).astimezone(UTC)
    fraction = f".{parsed.microsecond:06d}".rstrip("0") if parsed.microsecond else ""
    return parsed.strftime("%Y-%m-%dT%H:%M:%S") + fraction + "Z"


def label_set(labels: Mapping[str, str]) -> str:
    """As Prometheus prints a label set: ``{a="1", b="2"}``, sorted by name."""
    return "{" + ", ".join(f"{k}={json.dumps(labels[k])}" for k in sorted(labels)) + "}"


def alert_labels(payload: Payload) -> dict[str, str]:
    stage = payload["stage"]
    labels = {
        "alertname": payload["rule"]["slug"],
        "team": payload["team"]["slug"],
        "pipeline": payload["pipeline"]["slug"],
        "stage": stage["slug"] if stage else "e2e",
        "severity": payload["rule"]["severity"],
    }
    # An empty label is no label to Alertmanager: a burn-rate alert has no percentile.
    if payload["percentile"]:
        labels["percentile"] = payload["percentile"]
    return labels


def alert_annotations(payload: Payload) -> dict[str, str]:
    links = payload["links"]
    annotations = {
        "summary": payload["summary"],
        "description": text.description(payload),
        "dashboard": links["dashboard"],
    }
    if links["incident"]:
        annotations["incident"] = links["incident"]
    # Not in every payload: a rule's runbook, when the payload carries one.
    extra: Mapping[str, object] = links
    runbook = extra.get("runbook")
    if isinstance(runbook, str) and runbook:
        annotations["runbook_url"] = runbook
    return annotations


def message(channel: Channel, payload: Payload) -> dict[str, Any]:
    """The webhook message for ``payload``, keys in the order Alertmanager writes them."""
    incident = payload["incident"]
    status = "resolved" if text.event(payload) == text.RESOLVED else "firing"
    labels = alert_labels(payload)
    annotations = alert_annotations(payload)
    group_labels = {k: labels[k] for k in _GROUP_BY}
    alert = {
        "status": status,
        "labels": labels,
        "annotations": annotations,
        "startsAt": rfc3339(incident["started_at"]),
        "endsAt": rfc3339(incident["ended_at"]) if status == "resolved" else ZERO_TIME,
        "generatorURL": payload["links"]["dashboard"],
        "fingerprint": incident["fingerprint"],
    }
    return {
        "receiver": channel.slug,
        "status": status,
        "alerts": [alert],
        "groupLabels": group_labels,
        # One alert: everything it has is common to the group.
        "commonLabels": dict(labels),
        "commonAnnotations": dict(annotations),
        "externalURL": settings.SITE_URL,
        "version": VERSION,
        "groupKey": "{}/" + label_set({"team": labels["team"]}) + ":" + label_set(group_labels),
        "truncatedAlerts": 0,
    }


def render(channel: Channel, payload: Payload) -> tuple[bytes, str]:
    body = json.dumps(message(channel, payload), ensure_ascii=False, separators=(",", ":"))
    return body.encode("utf-8"), CONTENT_TYPE
