"""The lever advice a run-time client receives: from the pipeline's latest lever search."""

from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from apps.pipelines.models import Pipeline
from apps.whatif.changes import CAP, FALLBACK, HEDGE
from apps.whatif.models import RunKind, RunStatus, WhatIfRun

# Advice older than this is of traffic that may be gone: a client is better without it.
ADVICE_MAX_AGE = timedelta(hours=1)


def pipeline_advice(
    *, pipeline: Pipeline, now: datetime | None = None
) -> dict[str, dict[str, Any]]:
    """Per stage slug, the settings the latest lever search proposes, as the runtime
    document carries them: ``first_token_ms`` (with ``fallback_ms``), ``hedge_after_ms``,
    ``cap_ms``. A search on top of a scenario being tried does not count: it advises on
    traffic changed by hand."""
    now = now or timezone.now()
    runs = WhatIfRun.objects.filter(
        pipeline=pipeline,
        kind=RunKind.LEVERS,
        status=RunStatus.DONE,
        finished_at__gte=now - ADVICE_MAX_AGE,
    ).order_by("-finished_at", "-pk")
    for params, result in runs.values_list("params", "result")[:5]:
        if params.get("changes") or not isinstance(result, dict):
            continue
        return _settings(result.get("advice") or [])
    return {}


def _settings(advice: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    by_stage: dict[str, dict[str, Any]] = {}
    for item in advice:
        settings = by_stage.setdefault(item["stage"], {})
        (change,) = item["changes"]
        if item["lever"] == FALLBACK:
            settings.update(first_token_ms=change["ms"], fallback_ms=change["fallback_ms"])
        elif item["lever"] == HEDGE:
            settings["hedge_after_ms"] = change["ms"]
        elif item["lever"] == CAP:
            settings["cap_ms"] = change["ms"]
    return by_stage
