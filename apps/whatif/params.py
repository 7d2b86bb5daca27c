"""A run's parameters: everything that determines its answer, as JSON for its key."""

from collections.abc import Sequence
from typing import Any

from apps.pipelines.models import Pipeline, Stage
from apps.whatif.changes import Change


def stages_by_slug(*, pipeline: Pipeline) -> dict[str, Stage]:
    """The pipeline's stages, for checking changes against."""
    return {stage.slug: stage for stage in Stage.objects.filter(pipeline=pipeline)}


def _canonical(changes: Sequence[Change]) -> list[dict[str, Any]]:
    # The changes in a canonical order: their effect does not depend on it, so the same
    # scenario written in another order reuses the run.
    ordered = sorted(changes, key=lambda change: change.as_text())
    return [change.as_data() for change in ordered]


def replay_params(
    *, start: int, end: int, traces: int, percentile: str, changes: Sequence[Change]
) -> dict[str, Any]:
    return {
        "from": start,
        "to": end,
        "traces": traces,
        "percentile": percentile,
        "changes": _canonical(changes),
    }


def levers_params(
    *,
    start: int,
    end: int,
    traces: int,
    percentile: str,
    hit_ratio: float,
    changes: Sequence[Change] = (),
) -> dict[str, Any]:
    """A lever search on top of ``changes``, the scenario being tried (none: as it ran)."""
    params: dict[str, Any] = {
        "from": start,
        "to": end,
        "traces": traces,
        "percentile": percentile,
        "hit_ratio": hit_ratio,
    }
    if changes:  # absent, not empty, so that runs asked before scenarios keep their key
        params["changes"] = _canonical(changes)
    return params
