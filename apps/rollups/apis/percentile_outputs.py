"""What the percentile and series API returns: serializers, representations, examples."""

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.rollups.models import Measure
from apps.rollups.selectors import PipelinePercentiles, Window
from apps.rollups.selectors.percentiles import QUANTILES
from apps.rollups.selectors.windows import to_datetime


def window_data(window: Window) -> dict[str, Any]:
    return {
        "from": to_datetime(window.start),
        "to": to_datetime(window.end),
        "requested": {
            "from": to_datetime(window.requested_start),
            "to": to_datetime(window.requested_end),
        },
        "widened": {"before_s": window.widened_before, "after_s": window.widened_after},
    }


# --- Output ---------------------------------------------------------------------------------

STATUSES = ["ok", "over", "no_data"]


# A pattern rather than an enum: the e2e and stage outputs share the choice set, and
# the schema's enum naming cannot give a set used by two components a stable name.
@extend_schema_field({"type": "string", "pattern": f"^({'|'.join(STATUSES)})$", "example": "ok"})
class StatusField(serializers.CharField):
    """``ok``, ``over`` (a budgeted percentile above its budget) or ``no_data``."""


class _Bounds(serializers.Serializer):
    locals()["from"] = serializers.DateTimeField()
    to = serializers.DateTimeField()

    class Meta:
        ref_name = "RollupWindowBounds"


class _Widened(serializers.Serializer):
    before_s = serializers.IntegerField(help_text="Seconds added before the requested from.")
    after_s = serializers.IntegerField(help_text="Seconds added after the requested to.")

    class Meta:
        ref_name = "RollupWindowWidened"


class WindowOutput(serializers.Serializer):
    pipeline = serializers.CharField()
    locals()["from"] = serializers.DateTimeField(help_text="Effective start of the data.")
    to = serializers.DateTimeField(help_text="Effective end (exclusive) of the data.")
    requested = _Bounds(help_text="The window asked for, aligned to 10 s.")
    widened = _Widened(
        help_text="Where fine buckets are no longer kept, whole coarser buckets are used."
    )


def _distribution_fields() -> dict[str, serializers.Field]:
    percentiles = {
        name: serializers.FloatField(allow_null=True, help_text=f"{name} in ms; null: no data.")
        for name in QUANTILES
    }
    return {
        "count": serializers.IntegerField(),
        "errors": serializers.IntegerField(),
        **percentiles,
        "max": serializers.FloatField(allow_null=True),
        "budget": serializers.DictField(
            child=serializers.IntegerField(), allow_null=True, help_text="ms by percentile."
        ),
        "status": StatusField(help_text="ok, over (a budgeted percentile above it) or no_data."),
    }


class E2eOutput(serializers.Serializer):
    locals().update(_distribution_fields())

    class Meta:
        ref_name = "PercentilesEndToEnd"


class StageCriticalPathOutput(serializers.Serializer):
    share = serializers.FloatField(
        allow_null=True, help_text="Its critical-path time over all end-to-end time."
    )
    mean_ms = serializers.FloatField(allow_null=True)
    p95 = serializers.FloatField(allow_null=True)

    class Meta:
        ref_name = "PercentilesStageCriticalPath"


class StagePercentilesOutput(serializers.Serializer):
    slug = serializers.CharField()
    name = serializers.CharField()
    locals().update(_distribution_fields())
    critical_path = StageCriticalPathOutput()

    class Meta:
        ref_name = "PercentilesStage"


class UntrackedCriticalPathOutput(serializers.Serializer):
    share = serializers.FloatField(allow_null=True)
    mean_ms = serializers.FloatField(allow_null=True)

    class Meta:
        ref_name = "PercentilesUntrackedCriticalPath"


class UntrackedOutput(serializers.Serializer):
    critical_path = UntrackedCriticalPathOutput()

    class Meta:
        ref_name = "PercentilesUntracked"


class PercentilesOutput(WindowOutput):
    e2e = E2eOutput()
    stages = StagePercentilesOutput(many=True)
    untracked = UntrackedOutput()

    class Meta:
        ref_name = "PipelinePercentiles"


class PointOutput(serializers.Serializer):
    t = serializers.DateTimeField(help_text="Start of the point's step.")
    value = serializers.FloatField(allow_null=True, help_text="ms; null: no data.")
    count = serializers.IntegerField()

    class Meta:
        ref_name = "SeriesPoint"


class SeriesOutput(WindowOutput):
    stage = serializers.CharField(help_text="A stage slug, or e2e.")
    measure = serializers.ChoiceField(choices=Measure.labels)
    p = serializers.IntegerField()
    step_s = serializers.IntegerField()
    resolution_s = serializers.IntegerField(help_text="Width of the stored buckets used.")
    points = PointOutput(many=True)

    class Meta:
        ref_name = "PipelineSeries"


def percentiles_data(result: PipelinePercentiles) -> dict[str, Any]:
    e2e = result.e2e
    return {
        "pipeline": result.pipeline.slug,
        **window_data(result.window),
        "e2e": {
            "count": e2e.count,
            "errors": e2e.errors,
            **result.e2e_percentiles,
            "max": e2e.max_ms,
            "budget": result.pipeline.budget or None,
            "status": result.e2e_status,
        },
        "stages": [
            {
                "slug": item.stage.slug,
                "name": item.stage.name,
                "count": item.wall.count,
                "errors": item.wall.errors,
                **item.percentiles,
                "max": item.wall.max_ms,
                "budget": item.stage.budget or None,
                "status": item.status,
                "critical_path": {
                    "share": item.share,
                    "mean_ms": item.critical.mean_ms,
                    "p95": item.critical.percentile("p95"),
                },
            }
            for item in result.stages
        ],
        "untracked": {
            "critical_path": {
                "share": result.untracked_share,
                "mean_ms": result.untracked.mean_ms,
            }
        },
    }


# --- Examples ---------------------------------------------------------------------------------

_WINDOW_EXAMPLE = {
    "from": "2025-01-31T11:00:00Z",
    "to": "2025-01-31T12:00:00Z",
    "requested": {"from": "2025-01-31T11:00:00Z", "to": "2025-01-31T12:00:00Z"},
    "widened": {"before_s": 0, "after_s": 0},
}
PERCENTILES_EXAMPLE = {
    "pipeline": "rag-chat",
    **_WINDOW_EXAMPLE,
    "e2e": {"count": 1234, "errors": 3, "p50": 812.0, "p90": 1403.2, "p95": 1710.9,
            "p99": 2390.4, "max": 3120.0, "budget": {"p95": 2500}, "status": "ok"},
    "stages": [
        {"slug": "retrieval", "name": "Vector retrieval", "count": 1230, "errors": 0,
         "p50": 183.0, "p90": 301.2, "p95": 352.3, "p99": 470.9, "max": 620.1,
         "budget": {"p95": 350}, "status": "over",
         "critical_path": {"share": 0.096, "mean_ms": 190.2, "p95": 340.0}},
        {"slug": "rerank", "name": "Rerank", "count": 0, "errors": 0,
         "p50": None, "p90": None, "p95": None, "p99": None, "max": None,
         "budget": {"p95": 80}, "status": "no_data",
         "critical_path": {"share": 0.0, "mean_ms": None, "p95": None}},
    ],
    "untracked": {"critical_path": {"share": 0.005, "mean_ms": 9.1}},
}  # fmt: skip
SERIES_EXAMPLE = {
    "pipeline": "rag-chat",
    **_WINDOW_EXAMPLE,
    "stage": "retrieval",
    "measure": "wall",
    "p": 95,
    "step_s": 30,
    "resolution_s": 10,
    "points": [
        {"t": "2025-01-31T11:00:00Z", "value": 341.7, "count": 12},
        {"t": "2025-01-31T11:00:30Z", "value": None, "count": 0},
    ],
}
