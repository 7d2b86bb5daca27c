"""The budget fit check of a pipeline over the last 7 days."""

from typing import Any

from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from apps.core.api.views import ApiView
from apps.pipelines.access import pipeline_for_request
from apps.pipelines.models import Percentile
from apps.rollups.selectors.fit import HEADROOM, PipelineFit, pipeline_fit
from apps.teams.api_schema import team_schema


class FitEndToEndOutput(serializers.Serializer):
    percentile = serializers.ChoiceField(choices=Percentile.choices)
    budget_ms = serializers.IntegerField(help_text="The headline end-to-end budget.")
    observed_ms = serializers.FloatField(allow_null=True, help_text="Observed at that percentile.")
    over_budget = serializers.IntegerField(help_text="Traces over the end-to-end budget.")
    share_over_budget = serializers.FloatField(allow_null=True)
    expected_share = serializers.FloatField(help_text="1 - percentile.")
    inconsistent = serializers.IntegerField(
        help_text="Traces where every budgeted stage met its budget, yet the end-to-end "
        "time exceeded the end-to-end budget."
    )
    share_inconsistent = serializers.FloatField(allow_null=True)
    untracked_ms = serializers.FloatField(
        allow_null=True, help_text="Critical-path time in no stage, at the same percentile."
    )

    class Meta:
        ref_name = "FitEndToEnd"


class FitStageOutput(serializers.Serializer):
    slug = serializers.CharField()
    name = serializers.CharField()
    percentile = serializers.ChoiceField(choices=Percentile.choices)
    budget_ms = serializers.IntegerField(allow_null=True)
    runs = serializers.IntegerField(help_text="Traces in which the stage ran.")
    over_budget = serializers.IntegerField(allow_null=True, help_text="Runs over the budget.")
    share_over_budget = serializers.FloatField(allow_null=True, help_text="Of all traces.")
    share_of_runs_over_budget = serializers.FloatField(allow_null=True)
    expected_share = serializers.FloatField(
        help_text="1 - percentile: the share of runs a budget at that percentile allows over."
    )
    observed_ms = serializers.FloatField(allow_null=True, help_text="Wall time at the percentile.")
    critical_fraction = serializers.FloatField(
        allow_null=True, help_text="Share of the stage's wall time on the critical path."
    )
    suggested_ms = serializers.IntegerField(allow_null=True)

    class Meta:
        ref_name = "FitStage"


class FitOutput(serializers.Serializer):
    pipeline = serializers.CharField()
    locals()["from"] = serializers.DateTimeField()
    to = serializers.DateTimeField()
    traces = serializers.IntegerField(help_text="Complete traces of the pipeline in the period.")
    headroom = serializers.FloatField(help_text="Added to observed percentiles in suggestions.")
    scale = serializers.FloatField(
        allow_null=True,
        help_text="Factor applied to the stages' critical-path parts so that they fit the "
        "end-to-end budget (1: they already fit); null when nothing can fit or no data.",
    )
    e2e = FitEndToEndOutput(allow_null=True, help_text="Null without an end-to-end budget.")
    stages = FitStageOutput(many=True)

    class Meta:
        ref_name = "PipelineFit"


def fit_data(fit: PipelineFit) -> dict[str, Any]:
    e2e = None
    if fit.percentile is not None:
        e2e = {
            "percentile": fit.percentile,
            "budget_ms": fit.budget_ms,
            "observed_ms": fit.observed_ms,
            "over_budget": fit.over_budget,
            "share_over_budget": fit.share_over_budget,
            "expected_share": fit.expected_share,
            "inconsistent": fit.inconsistent,
            "share_inconsistent": fit.share_inconsistent,
            "untracked_ms": fit.untracked_ms,
        }
    stages = [
        {**vars(stage_fit), "slug": stage_fit.stage.slug, "name": stage_fit.stage.name}
        for stage_fit in fit.stages
    ]
    return {
        "pipeline": fit.pipeline.slug,
        "from": fit.start,
        "to": fit.end,
        "traces": fit.traces,
        "headroom": HEADROOM,
        "scale": fit.scale,
        "e2e": e2e,
        "stages": stages,
    }


class PipelineFitApi(ApiView):
    @team_schema(
        summary="Do the stage budgets fit the end-to-end budget? (last 7 days)",
        description=(
            "Over the pipeline's complete traces of the last 7 days: per stage, the share "
            "of traces over its budget next to the share its percentile allows; the share "
            "of traces where every budgeted stage met its budget but the end-to-end budget "
            "was exceeded (the allocation is inconsistent); and a suggested budget per "
            "stage: its observed percentile plus headroom, with the parts on the critical "
            "path scaled down together until they fit the end-to-end budget minus the "
            "untracked time."
        ),
        responses={200: FitOutput},
        tags=["objectives"],
    )
    def get(self, request: Request, pipeline_slug: str) -> Response:
        pipeline = pipeline_for_request(request, pipeline_slug)
        return Response(FitOutput(fit_data(pipeline_fit(pipeline=pipeline))).data)
