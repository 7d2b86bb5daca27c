"""Reads over rollups: window tiling, percentiles and series."""

from apps.rollups.selectors.percentiles import (
    PipelinePercentiles,
    StagePercentiles,
    budget_status,
    pipeline_percentiles,
)
from apps.rollups.selectors.series import DEFAULT_MAX_POINTS, Point, Series, pipeline_series
from apps.rollups.selectors.windows import (
    DEFAULT_WINDOW,
    MAX_WINDOW_SECONDS,
    WINDOWS,
    Tile,
    Window,
    requested_bounds,
    tile_window,
)

__all__ = [
    "DEFAULT_MAX_POINTS",
    "DEFAULT_WINDOW",
    "MAX_WINDOW_SECONDS",
    "WINDOWS",
    "PipelinePercentiles",
    "Point",
    "Series",
    "StagePercentiles",
    "Tile",
    "Window",
    "budget_status",
    "pipeline_percentiles",
    "pipeline_series",
    "requested_bounds",
    "tile_window",
]
