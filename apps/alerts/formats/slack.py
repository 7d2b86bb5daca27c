"""A Slack incoming-webhook message: a ``text`` fallback (notifications, old clients)
and blocks a person reads at a glance — what broke, by how much, where the time went,
and where to look next."""

import json
from typing import Any

from apps.alerts.formats import text
from apps.alerts.models import Channel
from apps.alerts.payload_types import Payload

CONTENT_TYPE = "application/json"
MAX_TRACE_LINKS = 3
_ICONS = {"critical": ":rotating_light:", "warning": ":warning:", "info": ":information_source:"}
_EVENT_ICONS = {text.RESOLVED: ":white_check_mark:", text.NO_DATA: ":grey_question:"}


def escape(value: str) -> str:
    """Slack's three control characters: a name like "<!channel>" must not ping anyone."""
    return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _link(url: str, label: str) -> str:
    return f"<{url}|{escape(label)}>"


def headline(payload: Payload) -> str:
    kind = text.event(payload)
    severity = payload["rule"]["severity"]
    if kind == text.TEST:
        lead = "Test notification"
    elif kind == text.RESOLVED:
        taken = text.duration(payload["incident"]["duration_s"])
        lead = f"Resolved after {taken}" if taken else "Resolved"
    elif kind == text.NO_DATA:
        lead = "No data"
    else:
        lead = severity.upper()
        if payload["reminder"]:
            lead += f" (still firing, reminder {payload['reminder']})"
    where = "" if text.is_burn_rate(payload) else f"{text.scope(payload)} "
    return f"{lead}: {payload['pipeline']['slug']} · {where}{text.observation(payload)}"


def _fields(payload: Payload) -> list[str]:
    stage = payload["stage"]
    fields = [
        f"*Severity*\n{payload['rule']['severity']}",
        f"*Pipeline*\n{escape(payload['pipeline']['name'])}",
        f"*Stage*\n{escape(stage['name']) if stage else 'end to end'}",
    ]
    if payload["percentile"] is not None:
        resolved = text.event(payload) == text.RESOLVED
        seen = "when it resolved" if resolved else "observed"
        fields += [
            f"*{payload['percentile']} {seen}*\n{text.ms(payload['observed_ms'])}",
            f"*Budget*\n{text.ms(payload['budget_ms'])}",
        ]
        if payload["over_by_ms"] is not None and not resolved:
            fields.append(f"*Over by*\n{text.ms(payload['over_by_ms'])}")
    degraded = text.degradation(payload)
    if degraded is not None:
        resolved = text.event(payload) == text.RESOLVED
        fields += [
            f"*Degraded{' when it resolved' if resolved else ''}*\n"
            f"{text.percent(degraded['rate_percent'])} of {degraded['requests']} requests",
            f"*Threshold*\n{text.threshold(degraded['threshold_percent'])}",
        ]
        if degraded["by_action"]:
            fields.append(f"*Decisions*\n{text.counts(degraded['by_action'])}")
        if degraded["by_stage"]:
            fields.append(f"*By stage*\n{escape(text.counts(degraded['by_stage']))}")
    for pair in payload["burn_rates"][:2]:
        fields.append(
            f"*Burn rate over {text.duration(pair['long_window_s'])}*\n"
            f"{text.rate(pair['long_burn_rate'])}x (limit {pair['factor']:g}x)"
        )
    fields.append(f"*Window*\n{text.duration(payload['window_s'])}")
    return fields


def _top_stages(payload: Payload) -> str:
    lines = []
    for item in payload["top_stages"]:
        line = f"• *{escape(item['name'])}* {text.share(item['share'])} of the critical path"
        if item["observed_ms"] is not None:
            line += f", {item['percentile']} {text.ms(item['observed_ms'])}"
            if item["budget_ms"] is not None:
                line += f" of {text.ms(item['budget_ms'])}"
        if item["over_by_ms"]:
            line += f" (over by {text.ms(item['over_by_ms'])})"
        lines.append(line)
    return "\n".join(lines)


def _links(payload: Payload) -> str:
    links = payload["links"]
    shown = [_link(links["dashboard"], "Dashboard")]
    if links["incident"]:
        shown.append(_link(links["incident"], "Incident"))
    traces = links["traces"][:MAX_TRACE_LINKS]
    shown += [_link(url, f"Trace {n}") for n, url in enumerate(traces, start=1)]
    return " · ".join(shown)


def message(payload: Payload) -> dict[str, Any]:
    kind = text.event(payload)
    icon = _EVENT_ICONS.get(kind) or (
        ":test_tube:" if kind == text.TEST else _ICONS.get(payload["rule"]["severity"], "")
    )
    title = headline(payload)
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": f"{icon} *{escape(title)}*"}},
        {"type": "section", "text": {"type": "mrkdwn", "text": escape(text.description(payload))}},
        {
            "type": "section",
            "fields": [{"type": "mrkdwn", "text": f} for f in _fields(payload)[:10]],
        },
    ]
    top = _top_stages(payload)
    if top and kind != text.RESOLVED:
        blocks.append(
            {"type": "section", "text": {"type": "mrkdwn", "text": f"*Top stages*\n{top}"}}
        )
    footer = (
        f"{_links(payload)} · rule {escape(payload['rule']['name'])}"
        f" · team {escape(payload['team']['name'])}"
    )
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": footer}]})
    return {"text": escape(title), "blocks": blocks}


def render(channel: Channel, payload: Payload) -> tuple[bytes, str]:
    body = json.dumps(message(payload), ensure_ascii=False, separators=(",", ":"))
    return body.encode("utf-8"), CONTENT_TYPE
