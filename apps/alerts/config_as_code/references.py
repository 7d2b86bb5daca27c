"""What alert rules name must exist once the file is applied: in the database or the file.

A section the file leaves out keeps what the database has. A section in the file
brings its own entries, and keeps the database's others unless ``--prune`` deletes
them; a pipeline in the file has exactly the file's stages.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from apps.alerts.config_as_code.alerts_schema import AlertSpec, AlertsSpec
from apps.alerts.config_as_code.channels_schema import ChannelsSpec
from apps.alerts.config_as_code.selectors import channels_for_config, pipeline_outlines_for_config
from apps.alerts.models import ConditionKind, RuleScope
from apps.pipelines.config_as_code.pipelines_schema import PipelinesSpec
from apps.pipelines.config_as_code.reader import Reader, suggest
from apps.pipelines.config_as_code.steps import PlanOptions
from apps.teams.models import Team


@dataclass(frozen=True)
class _Outline:
    """A pipeline as it will be: its stages, its objective, the stages the file removes."""

    stages: set[str]
    has_objective: bool
    removed: frozenset[str] = frozenset()


class _Known:
    """Slugs that will exist after the apply, and those the apply would prune."""

    def __init__(self, current: set[str], listed: set[str] | None, prune: bool) -> None:
        self.pruned = current - listed if listed is not None and prune else set()
        self.slugs = (current - self.pruned) | (listed or set())

    def missing(self, slug: str, what: str) -> str | None:
        if slug in self.slugs:
            return None
        if slug in self.pruned:
            return f"{what} “{slug}” is not in the file, and --prune deletes it."
        return (
            f"Unknown {what.lower()} “{slug}”: neither this team nor the file has it."
            f"{suggest(slug, self.slugs)}"
        )


def _pipelines(
    team: Team | None, spec: PipelinesSpec | None, prune: bool
) -> tuple[_Known, dict[str, _Outline]]:
    current = pipeline_outlines_for_config(team=team) if team else {}
    outlines = {slug: _Outline(stages, objective) for slug, (stages, objective) in current.items()}
    listed = {p.slug for p in spec.pipelines} if spec is not None else None
    known = _Known(set(outlines), listed, prune)
    for pipeline in spec.pipelines if spec is not None else []:
        stages = {stage.slug for stage in pipeline.stages}
        before = current.get(pipeline.slug, (set(), False))[0]
        outlines[pipeline.slug] = _Outline(
            stages, pipeline.objective_target is not None, frozenset(before - stages)
        )
    return known, outlines


def _channels(team: Team | None, spec: ChannelsSpec | None, prune: bool) -> _Known:
    current = set(channels_for_config(team=team).values_list("slug", flat=True)) if team else set()
    return _Known(current, spec.slugs() if spec is not None else None, prune)


def _check_alert(
    alert: AlertSpec,
    pipelines: _Known,
    outlines: dict[str, _Outline],
    channels: _Known,
    reader: Reader,
) -> None:
    problem = pipelines.missing(alert.pipeline, "Pipeline") if alert.pipeline else None
    if problem:
        reader.error(alert.pipeline_line, problem)
    elif alert.pipeline:
        outline = outlines[alert.pipeline]
        if alert.scope == RuleScope.STAGE and alert.stage and alert.stage not in outline.stages:
            hint = " (the file removes it)" if alert.stage in outline.removed else ""
            reader.error(
                alert.scope_line,
                f"Pipeline “{alert.pipeline}” has no stage “{alert.stage}”{hint}."
                f"{suggest(alert.stage, outline.stages)}",
            )
        if alert.condition == ConditionKind.BURN_RATE and not outline.has_objective:
            reader.error(
                alert.condition_line,
                f"Pipeline “{alert.pipeline}” has no objective, so it has no burn rate: give "
                "it one (objective: {target: 99.0, threshold_ms: 4000}) or use "
                "violation_for_minutes.",
            )
    for slug, line in alert.channels:
        problem = channels.missing(slug, "Channel")
        if problem:
            reader.error(line, problem)


def check_alerts(
    team: Team | None,
    spec: AlertsSpec,
    document: Mapping[str, Any],
    options: PlanOptions,
    reader: Reader,
) -> None:
    pipelines, outlines = _pipelines(team, document.get("pipelines"), options.prune)
    channels = _channels(team, document.get("channels"), options.prune)
    for alert in spec.alerts:
        _check_alert(alert, pipelines, outlines, channels, reader)
