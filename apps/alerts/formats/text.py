"""Numbers and phrases that every format shows the same way (Slack, Alertmanager, e-mail)."""

from apps.alerts.payload_types import Payload

FIRING, RESOLVED, NO_DATA, TEST = "firing", "resolved", "no_data", "test"
MISSING = "-"
_EVENTS = {
    "alert.firing": FIRING,
    "alert.resolved": RESOLVED,
    "alert.no_data": NO_DATA,
    "alert.test": TEST,
}


def event(payload: Payload) -> str:
    """firing, resolved, no_data or test."""
    return _EVENTS.get(payload["type"], FIRING)


def ms(value: float | None) -> str:
    if value is None:
        return MISSING
    if abs(value) >= 10:
        return f"{value:,.0f} ms"
    return f"{value:.1f} ms"


def rate(value: float | None) -> str:
    return MISSING if value is None else f"{value:.1f}"


def share(value: float | None) -> str:
    return MISSING if value is None else f"{value * 100:.0f} %"


def duration(seconds: float | None) -> str:
    """12 s, 5 min, 1 h 20 min, 2 d 3 h: two units at most, rounded down."""
    if seconds is None:
        return ""
    total = int(seconds)
    if total < 60:
        return f"{total} s"
    minutes, hours, days = total // 60, total // 3600, total // 86400
    if hours == 0:
        return f"{minutes} min"
    if days == 0:
        rest = minutes % 60
        return f"{hours} h {rest} min" if rest else f"{hours} h"
    rest = hours % 24
    return f"{days} d {rest} h" if rest else f"{days} d"


def scope(payload: Payload) -> str:
    stage = payload["stage"]
    return f"stage {stage['slug']}" if stage else "end to end"


def is_burn_rate(payload: Payload) -> bool:
    return bool(payload["burn_rates"]) or payload["percentile"] is None


def observation(payload: Payload) -> str:
    """What was seen against the budget, short enough for a subject line."""
    kind = event(payload)
    if is_burn_rate(payload):
        if kind == RESOLVED:
            return "objective burn rate back within its limit"
        if kind == NO_DATA:
            return "objective: no requests to judge"
        return burn_rate_phrase(payload) or "objective burning too fast"
    percentile, budget = payload["percentile"], ms(payload["budget_ms"])
    if kind == RESOLVED:
        return f"{percentile} back under its {budget} budget"
    if kind == NO_DATA:
        return f"{percentile}: too few traces to judge the {budget} budget"
    return f"{percentile} {ms(payload['observed_ms'])} > {budget} budget"


def burn_rate_phrase(payload: Payload) -> str:
    """The worst pair that holds: "burning 14.4x the allowed rate over 1 h and 5 min"."""
    if not payload["burn_rates"]:
        return ""
    pair = payload["burn_rates"][0]
    rate = pair["long_burn_rate"]
    shown = f"{rate:.1f}x" if rate is not None else f"over {pair['factor']:g}x"
    return (
        f"objective burning {shown} the allowed rate over {duration(pair['long_window_s'])} "
        f"and {duration(pair['short_window_s'])}"
    )


def description(payload: Payload) -> str:
    """Two or three sentences for a receiver that shows only one text."""
    kind = event(payload)
    where = scope(payload)
    window = duration(payload["window_s"])
    parts: list[str] = []
    if kind == TEST:
        parts.append("A test notification: nothing is wrong.")
    if is_burn_rate(payload):
        parts.append(payload["summary"].removeprefix("Test notification: ") + ".")
    elif kind == NO_DATA:
        parts.append(
            f"{payload['pipeline']['slug']} {where}: too few traces in the last {window} to "
            f"judge its {payload['percentile']} budget of {ms(payload['budget_ms'])}."
        )
    elif kind == RESOLVED:
        parts.append(
            f"{payload['pipeline']['slug']} {where} {payload['percentile']} is back under its "
            f"{ms(payload['budget_ms'])} budget."
        )
    else:
        over = payload["over_by_ms"]
        parts.append(
            f"{payload['pipeline']['slug']} {where} {payload['percentile']} was "
            f"{ms(payload['observed_ms'])} over the last {window}"
            + (f", {ms(over)} over its {ms(payload['budget_ms'])} budget." if over else ".")
        )
    if kind == RESOLVED and payload["incident"]["duration_s"] is not None:
        parts.append(f"It fired for {duration(payload['incident']['duration_s'])}.")
    top = [f"{s['slug']} {share(s['share'])}" for s in payload["top_stages"][:3] if s["share"]]
    if top and kind != RESOLVED:
        parts.append("Critical path: " + ", ".join(top) + ".")
    return " ".join(parts)
