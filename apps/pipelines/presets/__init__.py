"""Starting points for new pipelines, with rules for the spans real instrumentation emits."""

from apps.pipelines.presets.catalog import PRESET_CHOICES, PRESETS, Preset, PresetStage
from apps.pipelines.presets.plan import PlannedStage, PresetPlan, preset_plan
from apps.pipelines.presets.services import pipeline_create_from_preset, preset_clean

__all__ = [
    "PRESETS",
    "PRESET_CHOICES",
    "PlannedStage",
    "Preset",
    "PresetPlan",
    "PresetStage",
    "pipeline_create_from_preset",
    "preset_clean",
    "preset_plan",
]
