"""REST API over rollups: read-only, for personal API tokens and sessions."""

from apps.rollups.apis.percentiles import PipelinePercentilesApi, PipelineSeriesApi

__all__ = ["PipelinePercentilesApi", "PipelineSeriesApi"]
