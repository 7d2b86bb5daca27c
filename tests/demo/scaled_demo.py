"""The demo's pipeline with its budgets scaled as ``--speed`` scales the traffic, so that
the levers meet the same proportions in a fraction of the time."""

from functools import cache
from pathlib import Path
from typing import Any

import yaml
from django.conf import settings

from apps.pipelines.models import ENGINE_PORTIONS, Pipeline
from apps.teams.models import Team
from tests.builders.configuration import make_pipeline, make_stage

SPEED = 0.1


@cache
def demo_pipeline_config() -> dict[str, Any]:
    text = (Path(settings.BASE_DIR) / "demo" / "budgets.yaml").read_text()
    pipeline: dict[str, Any] = yaml.safe_load(text)["pipelines"][0]
    return pipeline


def scaled(ms: float, speed: float = SPEED) -> int:
    return max(1, round(ms * speed))


def scaled_stage_budgets(speed: float = SPEED) -> dict[str, int]:
    """The p95 budget of each stage the application opens, in pipeline order; the parts
    of the model's time that the engine's spans report are left out."""
    return {
        stage["slug"]: scaled(stage["budget"]["p95"], speed)
        for stage in demo_pipeline_config()["stages"]
        if not all(rule.get("portion") in ENGINE_PORTIONS for rule in stage["match"])
    }


def scaled_deadline_ms(speed: float = SPEED) -> int:
    """The runtime document's deadline: the objective's threshold."""
    return scaled(demo_pipeline_config()["objective"]["threshold_ms"], speed)


def scaled_demo_pipeline(team: Team, *, speed: float = SPEED) -> Pipeline:
    """The demo's pipeline and stages with no span rule: the client's spans name their
    stage themselves."""
    config = demo_pipeline_config()
    pipeline = make_pipeline(
        team,
        config["slug"],
        name=config["name"],
        match_service=config["match"]["service"],
        match_root_span=config["match"]["root_span"],
        budget={name: scaled(ms, speed) for name, ms in config["budget"].items()},
        objective_target=config["objective"]["target"],
        objective_threshold_ms=scaled_deadline_ms(speed),
    )
    for position, (slug, budget) in enumerate(scaled_stage_budgets(speed).items()):
        make_stage(pipeline, slug, position=position, budget_ms=budget)
    return pipeline


def scaled_demo_document(
    *, speed: float = SPEED, observed: dict[str, dict[str, float]] | None = None
) -> dict[str, Any]:
    """The runtime document the server would give for ``scaled_demo_pipeline``, with
    ``observed`` figures per stage (none by default, as before any traffic)."""
    observed = observed or {}
    return {
        "version": 1,
        "pipeline": demo_pipeline_config()["slug"],
        "deadline_ms": scaled_deadline_ms(speed),
        "stages": [
            {
                "stage": slug,
                "position": position,
                "budget": {"percentile": "p95", "ms": budget},
                "observed": {"count": 100, **observed[slug]} if slug in observed else None,
            }
            for position, (slug, budget) in enumerate(scaled_stage_budgets(speed).items())
        ],
        "refresh_s": 30,
    }
