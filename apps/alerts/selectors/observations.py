"""What a rule sees at one evaluation: per scope, whether its condition holds, and the facts.

A violation rule looks at the pipeline's open violations in its scope (the end-to-end
time, one stage, or each stage); a burn-rate rule at the objective's burn rates over
its window pairs; a degradation rule at the share of requests a run-time client
degraded (``degradation_observations``). A scope whose data stopped (an open violation
with no verdict for ``no_data_after``, or no request at all in that time) is "no data"
rather than ok.
"""

from datetime import datetime, timedelta
from typing import Any

from apps.alerts.burn_windows import burn_windows_for
from apps.alerts.models import AlertRule, ConditionKind, RuleScope, Severity
from apps.alerts.payload_types import BurnRateFacts
from apps.alerts.selectors.degradation_observations import (
    degradation_closing,
    degradation_observations,
)
from apps.alerts.selectors.observation import (
    E2E_KEY,
    OBJECTIVE_KEY,
    Observation,
    no_data_after,
    stage_key,
)
from apps.rollups.models import Violation
from apps.rollups.selectors.data_span import pipeline_data_from
from apps.rollups.selectors.objectives import good_total, window_coverage, window_judged

_SEVERITY_RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.CRITICAL: 2}


def _violation_facts(violation: Violation) -> dict[str, Any]:
    measure = {"measure": violation.measure_words} if violation.measure_words else {}
    return {
        "violation_id": violation.pk,
        **measure,
        "percentile": violation.percentile,
        "observed_ms": round(violation.observed_ms, 3),
        "peak_ms": round(violation.peak_ms, 3),
        "budget_ms": violation.budget_ms,
        "window_s": violation.window_s,
        "sample_count": violation.sample_count,
        "example_trace_ids": list(violation.example_trace_ids),
    }


def _violation_observations(rule: AlertRule, now: datetime) -> dict[str, Observation]:
    violations = Violation.objects.filter(pipeline_id=rule.pipeline_id, closed_at__isnull=True)
    if rule.scope == RuleScope.E2E:
        violations = violations.filter(stage__isnull=True)
    elif rule.scope == RuleScope.STAGE:
        violations = violations.filter(stage=rule.stage)
    else:
        violations = violations.filter(stage__isnull=False)
    if rule.violation_percentile:
        violations = violations.filter(percentile=rule.violation_percentile)
    grouped: dict[str, list[Violation]] = {}
    for violation in violations.select_related("stage"):
        key = E2E_KEY if violation.stage_id is None else stage_key(violation.stage_id)
        grouped.setdefault(key, []).append(violation)
    stale_before = now - no_data_after(rule)
    factor = float(rule.violation_factor) if rule.violation_factor is not None else None
    observations = {}
    for key, found in grouped.items():
        # The percentile furthest over its budget speaks for the scope.
        worst = max(found, key=lambda v: (v.observed_ms / v.budget_ms, -v.pk))
        fresh = max(v.last_evaluated_at for v in found) > stale_before
        holds: bool | None = None
        if fresh:
            holds = factor is None or any(v.observed_ms >= factor * v.budget_ms for v in found)
        observations[key] = Observation(
            scope_key=key,
            holds=holds,
            stage=worst.stage,
            # With a factor the condition begins when the factor is first seen crossed.
            since=min(v.opened_at for v in found) if factor is None else None,
            facts=_violation_facts(worst),
        )
    return observations


def _burn_rate(
    pipeline_id: int, seconds: int, now: datetime, allowed: float
) -> tuple[float | None, int]:
    good, total = good_total(
        pipeline_id=pipeline_id, start=now - timedelta(seconds=seconds), end=now
    )
    if not total:
        return None, 0
    return (total - good) / total / allowed, total


def _burn_observation(rule: AlertRule, now: datetime) -> dict[str, Observation]:
    pipeline = rule.pipeline
    if pipeline.objective_target is None or pipeline.objective_threshold_ms is None:
        return {}
    allowed = 1 - float(pipeline.objective_target) / 100
    rates: dict[int, tuple[float | None, int]] = {}

    def rate(seconds: int) -> tuple[float | None, int]:
        if seconds not in rates:
            rates[seconds] = _burn_rate(pipeline.pk, seconds, now, allowed)
        return rates[seconds]

    _, recent = rate(int(no_data_after(rule).total_seconds()))
    if not recent:
        return {OBJECTIVE_KEY: Observation(scope_key=OBJECTIVE_KEY, holds=None)}
    data_from = pipeline_data_from(pipeline_id=pipeline.pk)

    def judged(seconds: int) -> bool:
        return window_judged(window_coverage(data_from=data_from, seconds=seconds, now=now))

    holding: list[BurnRateFacts] = []
    pairs: list[BurnRateFacts] = []
    for pair in burn_windows_for(rule.burn_windows):
        long_rate, _ = rate(pair["long_s"])
        short_rate, short_total = rate(pair["short_s"])
        facts: BurnRateFacts = {
            "long_window_s": pair["long_s"],
            "short_window_s": pair["short_s"],
            "factor": pair["factor"],
            "long_burn_rate": None if long_rate is None else round(long_rate, 4),
            "short_burn_rate": None if short_rate is None else round(short_rate, 4),
            "severity": pair["severity"],
        }
        pairs.append(facts)
        # A short window needs the pipeline's sample floor: one slow request in an
        # empty five minutes is not a burn. Each window needs data over enough of it: a
        # new pipeline's first minutes are no burn over three days.
        if (
            judged(pair["long_s"])
            and judged(pair["short_s"])
            and long_rate is not None
            and short_rate is not None
            and short_total >= pipeline.min_samples
            and long_rate >= pair["factor"]
            and short_rate >= pair["factor"]
        ):
            holding.append(facts)
    severity = max(
        (p["severity"] for p in holding), key=lambda s: _SEVERITY_RANK[Severity(s)], default=None
    )
    return {
        OBJECTIVE_KEY: Observation(
            scope_key=OBJECTIVE_KEY,
            holds=bool(holding),
            severity=severity,
            facts={
                "objective_target": float(pipeline.objective_target),
                "objective_threshold_ms": pipeline.objective_threshold_ms,
                "burn_rates": holding or pairs,
                "percentile": None,
                "observed_ms": None,
                "budget_ms": pipeline.objective_threshold_ms,
                "window_s": max(p["long_window_s"] for p in holding or pairs),
                "example_trace_ids": [],
            },
        )
    }


def closing_facts(*, facts: dict[str, Any], observation: Observation | None) -> dict[str, Any]:
    """The figures an incident resolves on, to say "back under" with the figure seen then.

    A violation rule's scope has no observation once its violation closed: the closed
    violation's last evaluation is the figure. A burn-rate rule's observation carries
    every pair's rates at that moment, a degradation rule's the share of the window.
    """
    if observation is not None and "burn_rates" in observation.facts:
        return {"burn_rates": observation.facts["burn_rates"]}
    if "degradation" in facts:
        return degradation_closing(facts=facts, observation=observation)
    violation_id = facts.get("violation_id")
    if violation_id is None:
        return {}
    last = Violation.objects.filter(pk=violation_id).values("observed_ms", "sample_count").first()
    if last is None:
        return {}
    return {
        "observed_ms": round(last["observed_ms"], 3),
        "sample_count": last["sample_count"],
    }


def rule_observations(rule: AlertRule, now: datetime) -> dict[str, Observation]:
    """The scopes of ``rule`` with something to say at ``now``; a scope absent is ok."""
    if rule.condition == ConditionKind.BURN_RATE:
        return _burn_observation(rule, now)
    if rule.condition == ConditionKind.DEGRADATION:
        return degradation_observations(rule, now)
    return _violation_observations(rule, now)
