"""The answers a worker computes for a run: a replay under changes, or the levers.

Both read a trace sample (``sample.trace_sample``) and return plain JSON, which the
run keeps and the API and the page show as it is.
"""

import hashlib
import json
from typing import Any

import numpy as np

from apps.core.percentiles import QUANTILES
from apps.core.time import NS_PER_MS, to_datetime
from apps.pipelines.models import Pipeline, Portion, Stage
from apps.pipelines.selectors import pipeline_with_stages
from apps.whatif.advice import AdviceStage, advice_find
from apps.whatif.changes import Change, changes_from_data
from apps.whatif.levers import DEFAULT_HIT_RATIO, LeverStage, levers_find
from apps.whatif.outcome import PipelineInfo, Resamples, StageInfo, ms, nearest_rank, side
from apps.whatif.replay import ReplayResult, replay
from apps.whatif.scenario import Scenario, scenario_compile
from apps.whatif.selectors.sample import TraceSample, trace_sample

DISTRIBUTION_BINS = 40
RULE_FIELDS = (
    "span_name", "name_match", "attributes", "span_kind", "service", "portion",
    "first_token_event", "position",
)  # fmt: skip


def pipeline_fingerprint(*, pipeline: Pipeline) -> str:
    """What in a pipeline's configuration changes a what-if's answer: its stages, rules,
    budgets and objective. A run keyed with it is never reused after they change."""
    pipeline = pipeline_with_stages(pipeline=pipeline)
    stages = [
        {
            "slug": stage.slug,
            "position": stage.position,
            "budget": stage.budget,
            "degrade": stage.degrade,
            "rules": [[getattr(rule, name) for name in RULE_FIELDS] for rule in stage.rules.all()],
        }
        for stage in pipeline.stages.all()
    ]
    shape = {
        "budget": pipeline.budget,
        "objective": [str(pipeline.objective_target), pipeline.objective_threshold_ms],
        "stages": stages,
    }
    text = json.dumps(shape, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _stage_infos(stages: list[Stage]) -> list[StageInfo]:
    return [StageInfo(stage.slug, stage.name, stage.budget) for stage in stages]


def _pipeline_info(pipeline: Pipeline) -> PipelineInfo:
    target = pipeline.objective_target
    return PipelineInfo(
        budget=pipeline.budget,
        objective_target=None if target is None else float(target),
        objective_threshold_ms=pipeline.objective_threshold_ms,
    )


def _sample_data(sample: TraceSample) -> dict[str, Any]:
    return {
        "traces": sample.traces,
        "traces_in_window": sample.in_window,
        "left_out": sample.left_out,
        "left_out_by": sample.left_out_by,
        "spans": sample.spans,
        "bytes_read": sample.bytes_read,
        "window": {
            "from": to_datetime(sample.start).isoformat(),
            "to": to_datetime(sample.end).isoformat(),
        },
    }


def _distribution(before: np.ndarray, after: np.ndarray) -> dict[str, Any]:
    """Both end-to-end distributions over the same bins; the last bin holds the tail."""
    both = np.concatenate([before, after]) / NS_PER_MS
    if not len(both):
        return {"edges_ms": [], "before": [], "after": []}
    top = float(np.percentile(both, 99.5)) or 1.0
    edges = np.linspace(0.0, top, DISTRIBUTION_BINS + 1)

    def counts(values: np.ndarray) -> list[int]:
        clipped = np.minimum(values / NS_PER_MS, top)
        return np.histogram(clipped, bins=edges)[0].astype(int).tolist()

    return {
        "edges_ms": [round(float(edge), 1) for edge in edges],
        "before": counts(before),
        "after": counts(after),
    }


def whatif_replay_result(*, pipeline: Pipeline, params: dict[str, Any]) -> dict[str, Any]:
    """Replay a sample of the window before and after the changes in ``params``."""
    sample = trace_sample(
        pipeline=pipeline, start=params["from"], end=params["to"], size=params["traces"]
    )
    stages = {stage.slug: stage for stage in sample.stages}
    changes: list[Change] = changes_from_data(params["changes"], stages=stages)
    model = sample.model
    scenario = scenario_compile(
        changes,
        stage_slugs=model.stage_slugs,
        budgets_ms={stage.slug: stage.budget_ms for stage in sample.stages},
    )
    before = replay(model, Scenario())
    after = replay(model, scenario)
    resamples = Resamples.draw(model.trace_count)
    infos, pipeline_info = _stage_infos(sample.stages), _pipeline_info(sample.pipeline)
    percentile = params["percentile"]
    before_ns = nearest_rank(before.e2e_ns, QUANTILES[percentile])
    after_ns = nearest_rank(after.e2e_ns, QUANTILES[percentile])
    saving = None if before_ns is None or after_ns is None else before_ns - after_ns
    share = round(saving / before_ns * 100, 1) if saving is not None and before_ns else None

    def figures(result: ReplayResult) -> dict[str, Any]:
        return side(
            result, stages=infos, pipeline=pipeline_info, errors=sample.errors, resamples=resamples
        )

    return {
        **_sample_data(sample),
        "percentile": percentile,
        "changes": [change.as_data() for change in changes],
        "headline": {
            "before_ms": ms(before_ns),
            "after_ms": ms(after_ns),
            "saving_ms": ms(saving),
            "saving_pct": share,
        },
        "before": figures(before),
        "after": figures(after),
        "distribution": _distribution(before.e2e_ns, after.e2e_ns),
    }


def whatif_levers_result(*, pipeline: Pipeline, params: dict[str, Any]) -> dict[str, Any]:
    """The levers of a sample of the window, by their saving at the percentile."""
    sample = trace_sample(
        pipeline=pipeline, start=params["from"], end=params["to"], size=params["traces"]
    )
    stages = {stage.slug: stage for stage in sample.stages}
    found = levers_find(
        sample.model,
        stages=[LeverStage(stage.slug, stage.name) for stage in sample.stages],
        percentile=params["percentile"],
        hit_ratio=params.get("hit_ratio", DEFAULT_HIT_RATIO),
        scenario=changes_from_data(params.get("changes", []), stages=stages),
        budgets_ms={stage.slug: stage.budget_ms for stage in sample.stages},
    )
    advice = advice_find(
        sample.model,
        stages=[advice_stage(stage) for stage in sample.stages],
        deadline_ms=sample.pipeline.deadline_ms,
    )
    return {**_sample_data(sample), **found, "advice": [a.as_data() for a in advice]}


def advice_stage(stage: Stage) -> AdviceStage:
    """A stage ends at a first token when a rule takes an LLM span up to it, or when its
    degrade policy names a fallback (a stage the client declares has no rules)."""
    by_rule = any(
        rule.portion in (Portion.UNTIL_FIRST_TOKEN, Portion.PREFILL) for rule in stage.rules.all()
    )
    policy = stage.degrade or {}
    by_policy = "first_token_ms" in policy or "fallback" in policy.get("levers", ())
    return AdviceStage(stage.slug, stage.name, stage.budget_ms, by_rule or by_policy)
