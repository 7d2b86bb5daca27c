"""A pipeline's objective: error budget left over 30 days and burn rates."""

from datetime import datetime
from typing import Any

from django.utils import timezone
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from apps.core.api.views import ApiView
from apps.pipelines.access import pipeline_for_request
from apps.rollups.selectors.objectives import ObjectiveStatus, pipeline_objective_status
from apps.teams.api_schema import team_schema


class ObjectiveTargetOutput(serializers.Serializer):
    target = serializers.FloatField(help_text="Percent of requests to finish under the threshold.")
    threshold_ms = serializers.IntegerField()

    class Meta:
        ref_name = "ObjectiveTarget"


class ErrorBudgetOutput(serializers.Serializer):
    period_days = serializers.IntegerField()
    total = serializers.IntegerField(help_text="Complete traces in the period.")
    good = serializers.IntegerField(help_text="Those that finished under the threshold.")
    bad = serializers.IntegerField()
    allowed_bad = serializers.FloatField(help_text="(1 - target) x total.")
    remaining = serializers.FloatField(
        allow_null=True,
        help_text="(allowed bad - bad) / allowed bad: 1 untouched, 0 spent, negative "
        "overspent; null without traffic.",
    )

    class Meta:
        ref_name = "ObjectiveErrorBudget"


class BurnRateOutput(serializers.Serializer):
    window = serializers.CharField(help_text="5m, 30m, 1h, 6h or 3d.")
    seconds = serializers.IntegerField()
    total = serializers.IntegerField()
    good = serializers.IntegerField()
    bad_fraction = serializers.FloatField(allow_null=True)
    burn_rate = serializers.FloatField(
        allow_null=True,
        help_text="Bad fraction / (1 - target): 1 spends the budget exactly over 30 days.",
    )

    class Meta:
        ref_name = "ObjectiveBurnRate"


class ObjectiveOutput(serializers.Serializer):
    pipeline = serializers.CharField()
    objective = ObjectiveTargetOutput(allow_null=True, help_text="Null: no objective set.")
    computed_at = serializers.DateTimeField()
    error_budget = ErrorBudgetOutput(allow_null=True)
    burn_rates = BurnRateOutput(many=True)

    class Meta:
        ref_name = "PipelineObjectiveStatus"


def objective_data(slug: str, status: ObjectiveStatus | None, now: datetime) -> dict[str, Any]:
    if status is None:
        return {
            "pipeline": slug,
            "objective": None,
            "computed_at": now,
            "error_budget": None,
            "burn_rates": [],
        }
    return {
        "pipeline": slug,
        "objective": {"target": float(status.target), "threshold_ms": status.threshold_ms},
        "computed_at": status.computed_at,
        "error_budget": {
            "period_days": status.period_days,
            "total": status.total,
            "good": status.good,
            "bad": status.bad,
            "allowed_bad": status.allowed_bad,
            "remaining": status.error_budget_remaining,
        },
        "burn_rates": [vars(rate) for rate in status.burn_rates],
    }


class PipelineObjectiveApi(ApiView):
    @team_schema(
        summary="A pipeline's objective: error budget and burn rates",
        description=(
            "From the good/total counts of the end-to-end rollups: the error budget left "
            "over the last 30 days, and burn rates over 5m, 30m, 1h, 6h and 3d. Without an "
            "objective, `objective` and `error_budget` are null."
        ),
        responses={200: ObjectiveOutput},
        tags=["objectives"],
    )
    def get(self, request: Request, pipeline_slug: str) -> Response:
        pipeline = pipeline_for_request(request, pipeline_slug)
        now = timezone.now()
        status = pipeline_objective_status(pipeline=pipeline, now=now)
        return Response(ObjectiveOutput(objective_data(pipeline.slug, status, now)).data)
