"""Numbers and phrases that every format shows the same way (Slack, Alertmanager, e-mail)."""

from collections.abc import Mapping
from typing import Any

from apps.alerts.payload_types import DegradationFacts, Payload
from apps.core.figures import format_ms, format_seconds

FIRING, RESOLVED, NO_DATA, TEST = "firing", "resolved", "no_data", "test"
MISSING = "-"
# How a test's texts start: its figures are made up, and every reader must see so.
TEST_PREFIX = "Test notification, example figures (nothing is wrong): "
EXAMPLE_NOTE = " (example figures)"
# Incident resolutions, as the payload's ``incident.resolution`` spells them.
RESOLVED_FOR_NO_DATA = "no_data"
RESOLVED_BY_RULE_CHANGE = "rule_changed"
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
    """A duration as the pages write it ("812 ms", "1.43 s")."""
    return MISSING if value is None else format_ms(value)


def rate(value: float | None) -> str:
    return MISSING if value is None else f"{value:.1f}"


def share(value: float | None) -> str:
    return MISSING if value is None else f"{value * 100:.0f} %"


def duration(seconds: float | None) -> str:
    """A length of time in seconds as the pages write it: 12 s, 5 min, 1 h 20 min, 2 d 3 h."""
    return "" if seconds is None else format_seconds(seconds)


def scope(payload: Payload) -> str:
    stage = payload["stage"]
    return f"stage {stage['slug']}" if stage else "end to end"


def degradation(payload: Payload) -> DegradationFacts | None:
    """A degradation rule's figures; None for other rules (and payloads frozen before
    degradation rules were)."""
    return payload.get("degradation")


def is_burn_rate(payload: Payload) -> bool:
    return bool(payload["burn_rates"]) or (
        payload["percentile"] is None and degradation(payload) is None
    )


def percent(value: float | None) -> str:
    """A share as the messages write it: "34.0 %"."""
    return MISSING if value is None else f"{value:.1f} %"


def threshold(value: float) -> str:
    """A rule's percentage as it was set: "20 %", "12.5 %"."""
    return f"{value:g} %"


def ranked(values: Mapping[str, int]) -> list[tuple[str, int]]:
    """Largest first, then by name: the stored order is lost (JSON objects in the
    database keep their keys in an order of their own)."""
    return sorted(values.items(), key=lambda item: (-item[1], item[0]))


def counts(values: Mapping[str, int]) -> str:
    """ "270 fallback, 6 skip", largest first."""
    return ", ".join(f"{number} {name}" for name, number in ranked(values))


def degradation_share(facts: Mapping[str, Any], window_s: float | None) -> str:
    """ "34.0 % of 812 requests over 5 min"."""
    over = f" over {duration(window_s)}" if window_s else ""
    return f"{percent(facts['rate_percent'])} of {facts['requests']} requests{over}"


def degradation_firing_words(facts: Mapping[str, Any], window_s: float | None) -> str:
    """How a firing degradation reads: "degraded on 34.0 % of 812 requests over 5 min
    (threshold 20 %): 270 fallback, 6 skip"."""
    said = (
        f"degraded on {degradation_share(facts, window_s)} "
        f"(threshold {threshold(facts['threshold_percent'])})"
    )
    done = counts(facts["by_action"])
    return f"{said}: {done}" if done else said


def degradation_resolved_words(
    facts: Mapping[str, Any], window_s: float | None, resolution: str | None
) -> str:
    """How a resolved degradation reads: "degraded on 4.1 % of 790 requests over 5 min,
    back under its 20 % threshold", with the share seen when it resolved."""
    limit = threshold(facts["threshold_percent"])
    if resolution == RESOLVED_FOR_NO_DATA:
        return (
            f"too few requests to judge its {limit} degradation threshold, resolved for "
            "lack of data"
        )
    if resolution == RESOLVED_BY_RULE_CHANGE:
        return f"degradation against its {limit} threshold: resolved when the rule changed"
    return f"degraded on {degradation_share(facts, window_s)}, back under its {limit} threshold"


def degradation_no_data_words(facts: Mapping[str, Any]) -> str:
    limit = threshold(facts["threshold_percent"])
    return f"too few requests to judge the {limit} degradation threshold"


def resolved_words(
    *,
    percentile: str | None,
    observed_ms: float | None,
    budget_ms: float | None,
    resolution: str | None,
) -> str:
    """How a resolved violation reads: "p95 123 ms, back under its 150 ms budget".

    The figure is the one seen when it resolved. A rule with a factor resolves once the
    percentile is under that factor of its budget, possibly still over the budget itself:
    then it says so instead of "back under".
    """
    budget = ms(budget_ms)
    if resolution == RESOLVED_FOR_NO_DATA:
        return (
            f"{percentile}: too few traces to judge its {budget} budget, resolved for lack of data"
        )
    if resolution == RESOLVED_BY_RULE_CHANGE:
        return f"{percentile} against its {budget} budget: resolved when the rule changed"
    if observed_ms is None:
        return f"{percentile} back under its {budget} budget"
    if budget_ms is not None and observed_ms > budget_ms:
        return (
            f"{percentile} {ms(observed_ms)}, no longer over the alert's threshold "
            f"({budget} budget)"
        )
    return f"{percentile} {ms(observed_ms)}, back under its {budget} budget"


def recovering(*, observed_ms: float | None, budget_ms: float | None) -> bool:
    """A violation still open (it closes after some evaluations back under its budget)
    whose latest figure is already under the budget."""
    return observed_ms is not None and budget_ms is not None and observed_ms <= budget_ms


def firing_words(
    *,
    percentile: str | None,
    observed_ms: float | None,
    peak_ms: float | None,
    budget_ms: float | None,
) -> str:
    """How a firing violation reads: "p95 812 ms over its 500 ms budget".

    A violation stays open for a few evaluations after its percentile is back under
    the budget, and an alert may fire in that time: then the line names the peak that
    broke the budget and the figure of now, never "108 ms over its 180 ms budget".
    """
    budget = ms(budget_ms)
    if observed_ms is None:
        return f"{percentile} ? over its {budget} budget"
    if recovering(observed_ms=observed_ms, budget_ms=budget_ms) and peak_ms is not None:
        return (
            f"{percentile} peaked at {ms(peak_ms)} over its {budget} budget, {ms(observed_ms)} now"
        )
    return f"{percentile} {ms(observed_ms)} over its {budget} budget"


def burn_resolved_words(resolution: str | None) -> str:
    if resolution == RESOLVED_FOR_NO_DATA:
        return "objective: no requests to judge, resolved for lack of data"
    if resolution == RESOLVED_BY_RULE_CHANGE:
        return "objective burn rate: resolved when the rule changed"
    return "objective burn rate back within its limits"


def observation(payload: Payload) -> str:
    """What was seen against the budget, short enough for a subject line."""
    kind = event(payload)
    resolution = payload["incident"]["resolution"]
    degraded = degradation(payload)
    if degraded is not None:
        if kind == RESOLVED:
            return degradation_resolved_words(degraded, payload["window_s"], resolution)
        if kind == NO_DATA:
            return degradation_no_data_words(degraded)
        return degradation_firing_words(degraded, payload["window_s"])
    if is_burn_rate(payload):
        if kind == RESOLVED:
            return burn_resolved_words(resolution)
        if kind == NO_DATA:
            return "objective: no requests to judge"
        said = burn_rate_phrase(payload) or "objective burning too fast"
        return said + EXAMPLE_NOTE if kind == TEST else said
    percentile, budget = payload["percentile"], ms(payload["budget_ms"])
    if kind == RESOLVED:
        return resolved_words(
            percentile=percentile,
            observed_ms=payload["observed_ms"],
            budget_ms=payload["budget_ms"],
            resolution=resolution,
        )
    if kind == NO_DATA:
        return f"{percentile}: too few traces to judge the {budget} budget"
    observed, peak = payload["observed_ms"], payload["peak_ms"]
    if recovering(observed_ms=observed, budget_ms=payload["budget_ms"]) and peak is not None:
        said = f"{percentile} peaked at {ms(peak)} > {budget} budget, {ms(observed)} now"
    else:
        said = f"{percentile} {ms(observed)} > {budget} budget"
    return said + EXAMPLE_NOTE if kind == TEST else said


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
        parts.append("A test notification: nothing is wrong, and its figures are examples.")
    degraded = degradation(payload)
    if degraded is not None:
        parts += degradation_sentences(payload, degraded)
    elif is_burn_rate(payload):
        parts.append(payload["summary"].removeprefix(TEST_PREFIX) + ".")
    elif kind == NO_DATA:
        parts.append(
            f"{payload['pipeline']['slug']} {where}: too few traces in the last {window} to "
            f"judge its {payload['percentile']} budget of {ms(payload['budget_ms'])}."
        )
    elif kind == RESOLVED:
        said = resolved_words(
            percentile=payload["percentile"],
            observed_ms=payload["observed_ms"],
            budget_ms=payload["budget_ms"],
            resolution=payload["incident"]["resolution"],
        )
        parts.append(f"{payload['pipeline']['slug']} {where} {said}.")
    else:
        over, peak = payload["over_by_ms"], payload["peak_ms"]
        parts.append(
            f"{payload['pipeline']['slug']} {where} {payload['percentile']} was "
            f"{ms(payload['observed_ms'])} over the last {window}"
            + (f", {ms(over)} over its {ms(payload['budget_ms'])} budget." if over else ".")
        )
        if (
            not over
            and peak is not None
            and recovering(observed_ms=payload["observed_ms"], budget_ms=payload["budget_ms"])
        ):
            parts.append(
                f"It peaked at {ms(peak)}, over its {ms(payload['budget_ms'])} budget; the "
                "violation closes after a few evaluations back under it."
            )
    if kind == RESOLVED and payload["incident"]["duration_s"] is not None:
        parts.append(f"It fired for {duration(payload['incident']['duration_s'])}.")
    top = [f"{s['slug']} {share(s['share'])}" for s in payload["top_stages"][:3] if s["share"]]
    if top and kind != RESOLVED:
        parts.append("Critical path: " + ", ".join(top) + ".")
    return " ".join(parts)


def degradation_sentences(payload: Payload, facts: DegradationFacts) -> list[str]:
    """What a degradation alert says in full: the share, the decisions, and for the end
    to end the stages they were taken at."""
    kind = event(payload)
    name, where = payload["pipeline"]["slug"], scope(payload)
    window = duration(payload["window_s"])
    limit = threshold(facts["threshold_percent"])
    if kind == NO_DATA:
        return [
            f"{name} {where}: too few requests in the last {window} to judge its {limit} "
            "degradation threshold."
        ]
    if kind == RESOLVED:
        said = degradation_resolved_words(
            facts, payload["window_s"], payload["incident"]["resolution"]
        )
        return [f"{name} {where} {said}."]
    parts = [
        f"{name} {where}: run-time clients degraded {facts['degraded']} of {facts['requests']} "
        f"requests ({percent(facts['rate_percent'])}) over the last {window}, at or over the "
        f"rule's {limit} threshold."
    ]
    if facts["by_action"]:
        parts.append(f"Decisions: {counts(facts['by_action'])}.")
    if facts["by_stage"]:
        parts.append(f"Degraded requests by stage: {counts(facts['by_stage'])}.")
    if facts["peak_rate_percent"] > facts["rate_percent"]:
        parts.append(f"It peaked at {percent(facts['peak_rate_percent'])}.")
    return parts
