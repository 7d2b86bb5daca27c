"""A stage's LLM calls over a window: how answers streamed, and the split by model."""

from typing import Any

from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from apps.core.api.views import ApiView
from apps.core.percentiles import QUANTILES
from apps.pipelines.access import stage_for_request
from apps.rollups.apis.percentiles import window_parameters
from apps.rollups.apis.serializers import WindowInput, WindowOutput, window_data
from apps.rollups.models import STREAM_MEASURES
from apps.rollups.selectors.llm import STREAM_NAMES, stage_llm_figures, stage_model_shares
from apps.rollups.selectors.percentiles import Distribution
from apps.rollups.selectors.windows import to_datetime
from apps.teams.api_schema import team_schema


class FiguresOutput(serializers.Serializer):
    count = serializers.IntegerField()
    locals().update({name: serializers.FloatField(allow_null=True) for name in QUANTILES})
    max = serializers.FloatField(allow_null=True)
    mean = serializers.FloatField(allow_null=True)

    class Meta:
        ref_name = "ModelFigures"


class StreamingOutput(serializers.Serializer):
    locals().update(
        {
            name: FiguresOutput(allow_null=True, help_text=help_text)
            for name, help_text in (
                ("time_per_output_token", "ms per output token after the first."),
                ("output_tokens_per_s", "Output tokens over the time after the first token."),
                ("max_chunk_gap", "ms: per answer, the longest gap between two chunks."),
            )
        }
    )

    class Meta:
        ref_name = "ModelStreaming"


class ModelOutput(serializers.Serializer):
    provider = serializers.CharField(
        help_text="gen_ai.provider.name or gen_ai.system; may be empty."
    )
    model = serializers.CharField(help_text="gen_ai.response.model, else gen_ai.request.model.")
    share = serializers.FloatField(help_text="Of the stage's requests that name a model.")
    # "errors" is a Serializer property: declared in the class namespace directly.
    locals()["errors"] = serializers.IntegerField(help_text="Requests with an error.")
    wall = FiguresOutput(help_text="The stage's wall time, ms.")
    critical_path = FiguresOutput(help_text="The stage's time on the critical path, ms.")
    streaming = StreamingOutput()


class SharePointOutput(serializers.Serializer):
    start = serializers.DateTimeField()
    count = serializers.IntegerField(help_text="Requests that name a model.")
    shares = serializers.DictField(
        child=serializers.FloatField(), help_text="By model (provider/model), summing to 1."
    )


class SharesOutput(serializers.Serializer):
    step_s = serializers.IntegerField()
    points = SharePointOutput(many=True)


class StageModelsOutput(WindowOutput):
    stage = serializers.CharField()
    streaming = StreamingOutput()
    models = ModelOutput(many=True)
    shares = SharesOutput()


def _figures(distribution: Distribution | None) -> dict[str, Any] | None:
    if distribution is None or not distribution.count:
        return None
    return {
        "count": distribution.count,
        **distribution.percentiles(),
        "max": distribution.max_ms,
        "mean": distribution.mean_ms,
    }


def _streaming(streams: dict[int, Distribution]) -> dict[str, Any]:
    return {STREAM_NAMES[measure]: _figures(streams.get(measure)) for measure in STREAM_MEASURES}


class StageModelsApi(ApiView):
    InputSerializer = WindowInput

    @team_schema(
        summary="A stage's streamed answers and its split by model",
        description=(
            "From the stage samples' LLM calls (docs/ingestion.md, \"Models and "
            'streaming"): streaming figures over every model, then per model (the one '
            "that answered in the stage) its share, its wall and critical-path times and "
            "its streaming figures, and each model's share per point over the window. "
            "Times in ms; `output_tokens_per_s` in tokens a second; percentiles within 1 % "
            "of the exact nearest-rank values."
        ),
        parameters=window_parameters(),
        responses={200: StageModelsOutput},
        tags=["percentiles"],
    )
    def get(self, request: Request, pipeline_slug: str, stage_slug: str) -> Response:
        stage = stage_for_request(request, pipeline_slug, stage_slug)
        pipeline = stage.pipeline
        query = self.InputSerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        start, end = query.bounds()
        figures = stage_llm_figures(pipeline=pipeline, stage=stage, start=start, end=end)
        shares = stage_model_shares(pipeline=pipeline, stage=stage, start=start, end=end)
        data = {
            "pipeline": pipeline.slug,
            "stage": stage.slug,
            **window_data(figures.window),
            "streaming": _streaming(figures.streams),
            "models": [
                {
                    "provider": row.model.provider,
                    "model": row.model.model,
                    "share": round(row.share, 6),
                    "errors": row.wall.errors,
                    "wall": _figures(row.wall),
                    "critical_path": _figures(row.critical),
                    "streaming": _streaming(row.streams),
                }
                for row in figures.models
            ],
            "shares": {
                "step_s": shares.step,
                "points": [
                    {
                        "start": to_datetime(point),
                        "count": count,
                        "shares": {
                            str(model): round(share, 6)
                            for model, values in shares.shares
                            if (share := values[number])
                        },
                    }
                    for number, (point, count) in enumerate(
                        zip(shares.starts, shares.counts, strict=True)
                    )
                ],
            },
        }
        return Response(StageModelsOutput(data).data)
