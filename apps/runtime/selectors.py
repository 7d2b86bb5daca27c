"""The runtime document of a pipeline (``docs/runtime.md``): its budgets and the times
observed over the last window, compact, for a client that turns them into deadlines.

The document is the protocol between the server and every client: its keys change only
with ``docs/runtime.md`` and the clients.
"""

import hashlib
import json
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from apps.analysis.selectors.holdout import UncutTimes, holdout_stage_times
from apps.core.cached import cached_once
from apps.core.percentiles import PERCENTILES
from apps.core.time import FINEST_RESOLUTION, align_down
from apps.pipelines.models import Pipeline, Stage
from apps.rollups.selectors import pipeline_percentiles
from apps.rollups.selectors.percentiles import Distribution
from apps.whatif.selectors.advice import pipeline_advice

DOCUMENT_VERSION = 1
# Observed figures a client uses: the median for what a stage typically needs, the
# tails for hedging and for what a late call would have cost.
OBSERVED = ("p50", "p95", "p99")
COMPUTE_WAIT_S = 2.0


@dataclass(frozen=True)
class RuntimeDocument:
    body: bytes
    etag: str


def _observed(distribution: Distribution) -> dict[str, Any]:
    figures: dict[str, Any] = {"count": distribution.count}
    percentiles = distribution.percentiles()
    figures.update({name: percentiles[name] for name in OBSERVED})
    return figures


def _uncut(times: UncutTimes, window_s: int) -> dict[str, Any]:
    return {"window_s": window_s, "count": times.count, **times.percentiles}


def _stage(
    stage: Stage,
    position: int,
    wall: Distribution,
    advice: dict[str, Any],
    uncut: dict[str, Any],
) -> dict[str, Any]:
    budget = (
        None
        if stage.budget_ms is None
        else {"percentile": stage.budget_percentile, "ms": stage.budget_ms}
    )
    return {
        "stage": stage.slug,
        "position": position,
        "budget": budget,
        "observed": _observed(wall),
        "uncut": uncut,
        "degrade": dict(stage.degrade),
        "advice": advice,
    }


def runtime_document_data(*, pipeline: Pipeline, now: float | None = None) -> dict[str, Any]:
    """The document as data; stages in pipeline order, numbered from 0."""
    window_s = settings.RUNTIME_WINDOW_SECONDS
    # The bucket under way is included: a client wants the freshest figures there are.
    end = align_down(int(time.time() if now is None else now), FINEST_RESOLUTION)
    end += FINEST_RESOLUTION
    figures = pipeline_percentiles(
        pipeline=pipeline, start=end - window_s, end=end, critical_sketches=False
    )
    advice = pipeline_advice(pipeline=pipeline)
    uncut_s = settings.RUNTIME_UNCUT_WINDOW_SECONDS
    uncut = holdout_stage_times(
        pipeline_id=pipeline.pk, start_ns=(end - uncut_s) * 10**9, end_ns=end * 10**9
    )
    objective = (
        None
        if pipeline.objective_target is None
        else {
            "target": float(pipeline.objective_target),
            "threshold_ms": pipeline.objective_threshold_ms,
        }
    )
    return {
        "version": DOCUMENT_VERSION,
        "pipeline": pipeline.slug,
        "deadline_ms": pipeline.deadline_ms,
        "budget": {p: ms for p, ms in pipeline.budget.items() if p in PERCENTILES},
        "objective": objective,
        "observed": {"window_s": window_s, **_observed(figures.e2e)},
        "stages": [
            _stage(
                item.stage,
                position,
                item.wall,
                advice.get(item.stage.slug, {}),
                _uncut(uncut.get(item.stage.pk, UncutTimes()), uncut_s),
            )
            for position, item in enumerate(figures.stages)
        ],
        "holdout_percent": settings.RUNTIME_HOLDOUT_PERCENT,
        "refresh_s": settings.RUNTIME_REFRESH_SECONDS,
    }


def _encoded(data: dict[str, Any]) -> RuntimeDocument:
    body = json.dumps(data, separators=(",", ":"), sort_keys=True).encode()
    # Strong: the same bytes give the same tag in every process, so a fleet of clients
    # revalidates against any web process.
    etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
    return RuntimeDocument(body=body, etag=etag)


def runtime_document(*, pipeline: Pipeline) -> RuntimeDocument:
    """The encoded document, computed once per ``RUNTIME_DOCUMENT_CACHE_SECONDS`` per
    pipeline whatever the number of clients asking."""
    seconds = settings.RUNTIME_DOCUMENT_CACHE_SECONDS

    def compute() -> RuntimeDocument:
        return _encoded(runtime_document_data(pipeline=pipeline))

    if not seconds:
        return compute()
    # A budget changed shows within these seconds, like the observed figures.
    key = f"runtime:document:{pipeline.pk}"
    return cached_once(key, seconds=seconds, compute=compute, wait_s=COMPUTE_WAIT_S)
