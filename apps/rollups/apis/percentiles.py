"""Percentiles of a pipeline over a window, and one percentile as a chart series."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    extend_schema,
)
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from apps.core.api.views import ApiView
from apps.pipelines.access import pipeline_for_request
from apps.pipelines.models import Pipeline, Stage
from apps.rollups.apis.serializers import (
    PERCENTILES_EXAMPLE,
    SERIES_EXAMPLE,
    PercentilesOutput,
    SeriesOutput,
    StepField,
    WindowInput,
    percentiles_data,
    window_data,
)
from apps.rollups.models import E2E_STAGE_ID, TIME_MEASURE_LABELS, Measure
from apps.rollups.selectors import (
    DEFAULT_MAX_POINTS,
    DEFAULT_WINDOW,
    WINDOWS,
    Series,
    pipeline_percentiles,
    pipeline_series,
)
from apps.rollups.selectors.windows import to_datetime
from apps.teams.api_schema import team_schema

E2E = "e2e"
MAX_POINTS_LIMIT = 1440


def window_parameters() -> list[OpenApiParameter]:
    return [
        OpenApiParameter(
            "window",
            OpenApiTypes.STR,
            OpenApiParameter.QUERY,
            enum=list(WINDOWS),
            description=f"How far back from now (default {DEFAULT_WINDOW}); or give from/to.",
        ),
        OpenApiParameter(
            "from",
            OpenApiTypes.DATETIME,
            OpenApiParameter.QUERY,
            description="Start, RFC 3339 with an offset; aligned down to 10 s.",
        ),
        OpenApiParameter(
            "to",
            OpenApiTypes.DATETIME,
            OpenApiParameter.QUERY,
            description="End (exclusive), default now; at most 90 days after from.",
        ),
    ]


# --- Views ------------------------------------------------------------------------------------


class PipelinePercentilesApi(ApiView):
    InputSerializer = WindowInput

    @team_schema(
        summary="Percentiles of a pipeline and its stages over a window",
        description=(
            "Times in milliseconds, to 0.1 ms, within 1 % of the exact nearest-rank "
            "percentiles. A stage's p50…max are of its wall time; `critical_path` of its "
            "time on the critical path, whose `share` is its total over the total "
            "end-to-end time (stages plus untracked add up to 1). `status` is `over` when "
            "a budgeted percentile is above its budget, `no_data` without samples. "
            "Answers come from the coarsest stored buckets that tile the window; where "
            "fine buckets are no longer kept, `from`/`to` widen to whole coarser ones."
        ),
        parameters=window_parameters(),
        responses={200: PercentilesOutput},
        tags=["percentiles"],
    )
    @extend_schema(
        examples=[OpenApiExample("The last hour", value=PERCENTILES_EXAMPLE, response_only=True)]
    )
    def get(self, request: Request, pipeline_slug: str) -> Response:
        pipeline = pipeline_for_request(request, pipeline_slug)
        query = self.InputSerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        start, end = query.bounds()
        result = pipeline_percentiles(pipeline=pipeline, start=start, end=end)
        return Response(PercentilesOutput(percentiles_data(result)).data)


class PipelineSeriesApi(ApiView):
    class InputSerializer(WindowInput):
        stage = serializers.CharField(default=E2E, max_length=50)
        measure = serializers.ChoiceField(choices=TIME_MEASURE_LABELS, default="wall")
        p = serializers.ChoiceField(choices=["50", "90", "95", "99"], default="95")
        step = StepField(required=False)
        max_points = serializers.IntegerField(
            min_value=10, max_value=MAX_POINTS_LIMIT, default=DEFAULT_MAX_POINTS
        )

    @team_schema(
        summary="One percentile of a stage or end to end, as points for a chart",
        description=(
            "Never more points than `max_points`. The step is at least `step`, a multiple "
            "of the finest bucket width kept over the whole window (10 s for the last "
            "2 hours, 1 min for 3 days, then 1 h), and grows until the points fit; "
            "points are aligned to multiples of the step. `value` is null where a step "
            "holds no samples."
        ),
        parameters=[
            *window_parameters(),
            OpenApiParameter(
                "stage",
                OpenApiTypes.STR,
                OpenApiParameter.QUERY,
                description=f"A stage slug, or `{E2E}` (default) for end-to-end time.",
            ),
            OpenApiParameter(
                "measure",
                OpenApiTypes.STR,
                OpenApiParameter.QUERY,
                enum=TIME_MEASURE_LABELS,
                description="`wall` (default) or `critical` (time on the critical path).",
            ),
            OpenApiParameter(
                "p",
                OpenApiTypes.INT,
                OpenApiParameter.QUERY,
                enum=[50, 90, 95, 99],
                description="The percentile (default 95).",
            ),
            OpenApiParameter(
                "step",
                OpenApiTypes.STR,
                OpenApiParameter.QUERY,
                description="Smallest step wanted: seconds or 30s, 5m, 1h, 1d.",
            ),
            OpenApiParameter(
                "max_points",
                OpenApiTypes.INT,
                OpenApiParameter.QUERY,
                description=f"At most this many points, 10 to {MAX_POINTS_LIMIT} "
                f"(default {DEFAULT_MAX_POINTS}).",
            ),
        ],
        responses={200: SeriesOutput},
        tags=["percentiles"],
    )
    @extend_schema(
        examples=[OpenApiExample("Retrieval p95", value=SERIES_EXAMPLE, response_only=True)]
    )
    def get(self, request: Request, pipeline_slug: str) -> Response:
        pipeline = pipeline_for_request(request, pipeline_slug)
        query = self.InputSerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        params = query.validated_data
        start, end = query.bounds()
        stage_id = self._stage_id(pipeline, params["stage"], params["measure"])
        series: Series = pipeline_series(
            pipeline=pipeline,
            stage_id=stage_id,
            measure=Measure.CRITICAL if params["measure"] == "critical" else Measure.WALL,
            quantile=int(params["p"]) / 100,
            start=start,
            end=end,
            step=params.get("step"),
            max_points=params["max_points"],
        )
        data = {
            "pipeline": pipeline.slug,
            **window_data(series.window),
            "stage": params["stage"],
            "measure": params["measure"],
            "p": int(params["p"]),
            "step_s": series.step,
            "resolution_s": series.resolution,
            "points": [
                {"t": to_datetime(point.start), "value": point.value, "count": point.count}
                for point in series.points
            ],
        }
        return Response(SeriesOutput(data).data)

    @staticmethod
    def _stage_id(pipeline: Pipeline, slug: str, measure: str) -> int:
        if slug == E2E:
            if measure != "wall":
                raise serializers.ValidationError(
                    {"measure": ["End to end, wall time is the critical path: use wall."]}
                )
            return E2E_STAGE_ID
        stage = Stage.objects.filter(pipeline=pipeline, slug=slug).only("pk").first()
        if stage is None:
            raise serializers.ValidationError({"stage": [f"This pipeline has no stage “{slug}”."]})
        return stage.pk
