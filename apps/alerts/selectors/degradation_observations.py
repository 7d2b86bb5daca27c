"""What a degradation rule sees: the share of the pipeline's requests that a run-time
client degraded (skip, fallback, hedge, cap, timeout: ``docs/runtime.md``), per scope.

The share is taken over the pipeline's evaluation window ending at the evaluation, to
the 10 s, from the degradation ledger and the requests the rollups counted. A window
of at least the pipeline's ``min_samples`` requests gives a verdict: the condition
holds when the share is at least the rule's percentage. A window of fewer gives none,
as the budget evaluation gives none on too few samples: the scope's state stays where
it is. Once fewer than ``min_samples`` requests came in over the rule's "no data
after", no window in that time could have given a verdict: the scope has no data.
"""

from datetime import datetime
from decimal import Decimal
from typing import Any

from apps.alerts.models import AlertRule, RuleScope
from apps.alerts.payload_types import DegradationFacts
from apps.alerts.selectors.observation import E2E_KEY, Observation, no_data_after, stage_key
from apps.core.time import FINEST_RESOLUTION, align_down
from apps.pipelines.models import Stage
from apps.rollups.selectors.degradations import (
    Tally,
    degraded_trace_ids,
    pipeline_ledger,
    window_requests,
)

EXAMPLES = 5
# What the latest evaluation replaces while an incident fires; the peak and the
# examples stay those of the worst window seen.
_LATEST = ("rate_percent", "degraded", "requests", "by_action", "by_stage")


def _counted(counts: dict[str, int]) -> dict[str, int]:
    """Largest first, then by name: "270 fallback, 6 skip"."""
    return dict(sorted(((k, v) for k, v in counts.items() if v), key=lambda i: (-i[1], i[0])))


def _facts(
    *,
    rule: AlertRule,
    tally: Tally,
    requests: int,
    by_stage: dict[str, int],
    examples: list[str],
) -> dict[str, Any]:
    rate = round(min(100.0 * tally.traces / requests, 100.0), 2)
    assert rule.degradation_percent is not None
    degradation: DegradationFacts = {
        "rate_percent": rate,
        "peak_rate_percent": rate,
        "threshold_percent": float(rule.degradation_percent),
        "degraded": tally.traces,
        "requests": requests,
        "by_action": _counted(tally.by_action),
        "by_stage": _counted(by_stage),
    }
    return {
        "percentile": None,
        "observed_ms": None,
        "budget_ms": None,
        "window_s": rule.pipeline.evaluation_window_s,
        "example_trace_ids": examples,
        "degradation": degradation,
    }


def _holds(rule: AlertRule, tally: Tally, requests: int) -> bool:
    # Exact: 20 % of 812 requests is 162.4, so 162 degraded do not hold and 163 do.
    assert rule.degradation_percent is not None
    return Decimal(100 * tally.traces) >= rule.degradation_percent * requests


def _scopes(rule: AlertRule, stages: list[Stage]) -> list[Stage | None]:
    """The stages the rule watches, each its own scope; None for end to end."""
    if rule.scope == RuleScope.E2E:
        return [None]
    if rule.scope == RuleScope.STAGE:
        return [stage for stage in stages if stage.pk == rule.stage_id]
    return list(stages)


def _key(stage: Stage | None) -> str:
    return E2E_KEY if stage is None else stage_key(stage.pk)


def degradation_observations(rule: AlertRule, now: datetime) -> dict[str, Observation]:
    """Every scope of ``rule``: one per stage for ``any_stage``, so that a scope whose
    share fell under the threshold resolves on the figure it fell to."""
    pipeline = rule.pipeline
    end = align_down(int(now.timestamp()), FINEST_RESOLUTION)
    start = end - pipeline.evaluation_window_s
    stages = list(Stage.objects.filter(pipeline=pipeline).order_by("position", "id"))
    scopes = _scopes(rule, stages)
    requests = window_requests(pipeline=pipeline, start=start, end=end)
    if requests < pipeline.min_samples:
        silent = int(no_data_after(rule).total_seconds())
        since = align_down(end - silent, FINEST_RESOLUTION)
        recent = (
            requests if since >= start else window_requests(pipeline=pipeline, start=since, end=end)
        )
        stopped = recent < pipeline.min_samples
        return {
            _key(stage): Observation(
                scope_key=_key(stage),
                holds=None if stopped else False,
                stage=stage,
                judged=False,
            )
            for stage in scopes
        }
    ledger = pipeline_ledger(
        pipeline=pipeline, start=start, end=end, requests=requests, stages=stages
    )
    observations: dict[str, Observation] = {}
    for stage in scopes:
        if stage is None:
            tally = ledger.total
            by_stage = {row.stage.slug: row.tally.traces for row in ledger.stages}
        else:
            row = ledger.stage(stage.pk)
            tally = row.tally if row is not None else Tally()
            by_stage = {}
        holds = _holds(rule, tally, requests)
        examples = (
            degraded_trace_ids(pipeline=pipeline, start=start, end=end, stage=stage, limit=EXAMPLES)
            if holds
            else []
        )
        observations[_key(stage)] = Observation(
            scope_key=_key(stage),
            holds=holds,
            stage=stage,
            facts=_facts(
                rule=rule, tally=tally, requests=requests, by_stage=by_stage, examples=examples
            ),
        )
    return observations


def degradation_followed(*, facts: dict[str, Any], latest: dict[str, Any]) -> dict[str, Any]:
    """An incident's facts after another evaluation that holds: the latest share, and the
    peak with its examples when this one is the worst yet."""
    old: dict[str, Any] = facts.get("degradation") or {}
    new: dict[str, Any] = latest["degradation"]
    merged = {**facts, "degradation": {**old, **{k: new[k] for k in _LATEST}}}
    if new["rate_percent"] > old.get("peak_rate_percent", 0):
        merged["degradation"]["peak_rate_percent"] = new["rate_percent"]
        merged["example_trace_ids"] = latest["example_trace_ids"]
    return merged


def degradation_closing(
    *, facts: dict[str, Any], observation: Observation | None
) -> dict[str, Any]:
    """The figures a degradation incident resolves on: the share that fell under the
    threshold, the peak and examples kept."""
    if observation is None or "degradation" not in observation.facts:
        return {}
    latest = observation.facts["degradation"]
    return {"degradation": {**facts["degradation"], **{k: latest[k] for k in _LATEST}}}
